"""A Horde of Γ-nets: many questions (GVFs) about many signals, every timescale, one shared tile coding.

- :mod:`~gamma_net_core.horde.fields`: field paths resolved on any message (no ROS import).
- :mod:`~gamma_net_core.horde.questions`: the questions YAML -> :class:`~gamma_net_core.horde.questions.HordeSpec`.
"""
