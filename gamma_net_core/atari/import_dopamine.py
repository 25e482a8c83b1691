"""`gamma-net atari import-dopamine`: a Dopamine TensorFlow checkpoint -> a policy file (``--policy FILE``).

The paper's φ comes from Dopamine's published agents (Rainbow, Centipede@25M; the 200M-frame
agents). This reads the checkpoint's online network (``Online/Conv``, ``Conv_1``, ``Conv_2``,
``fully_connected``, ``fully_connected_1``) without TensorFlow
(:mod:`gamma_net_core.atari.tf_checkpoint`) into Dopamine's own layout
(:class:`gamma_net_core.atari.dopamine.DopamineQNetwork`: SAME padding, 7,744 inputs to φ,
Rainbow's C51 head) and writes it as a policy file that ``atari record``, ``atari points`` and
the ``ale_bridge`` take with ``--policy FILE``.
"""

from __future__ import annotations

import argparse

from gamma_net_core.report import Report, Table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="Dopamine checkpoint: prefix (…/tf_ckpt-199), its .index, or its folder")
    parser.add_argument("--agent", required=True, choices=("rainbow", "dqn"), help="the network's head")
    parser.add_argument("--out", required=True, help="policy file to write (atomically)")
    parser.add_argument("--game", default="centipede", help="the game it plays (its action count is checked)")
    parser.add_argument("--scope", default="Online/", help="variable scope of the network (Dopamine: Online/)")


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.atari.dopamine import from_tf_variables, network_file
    from gamma_net_core.atari.env import AtariConfig, AtariEnv
    from gamma_net_core.atari.policies import file_sha256
    from gamma_net_core.atari.tf_checkpoint import checkpoint_prefix, read_checkpoint
    from gamma_net_core.checkpoint import CheckpointError, save_torch

    prefix = checkpoint_prefix(args.checkpoint)
    variables = read_checkpoint(prefix)
    network = from_tf_variables(variables, args.agent, prefix=args.scope)
    actions = AtariEnv(AtariConfig(game=args.game), seed=0).num_actions
    if network.num_actions != actions:
        raise CheckpointError(
            f"{prefix}: the {args.agent} head gives {network.num_actions} actions; {args.game} has {actions} "
            "(another game, or the other --agent?)"
        )
    index = f"{prefix}.index"
    source = {"checkpoint": str(prefix), "index_sha256": file_sha256(index), "agent": args.agent}
    path = save_torch(args.out, network_file(network, game=args.game, source=source))
    table = Table("atari import-dopamine", ["checkpoint", "agent", "actions", "φ inputs", "tensors read", "out"])
    table.add(str(prefix), args.agent, network.num_actions, network.flat_size, len(variables), str(path))
    return Report(
        tables=[table],
        data={"out": str(path), "agent": args.agent, "num_actions": network.num_actions, "source": source},
        files=[str(path)],
    )
