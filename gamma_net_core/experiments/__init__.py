"""The paper's studies and the `gamma-net` subcommands: configurations -> runs -> JSON -> figures."""
