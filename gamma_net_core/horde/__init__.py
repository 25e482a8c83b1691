"""A Horde of Γ-nets: many questions (GVFs) about many signals, every timescale, one shared tile coding.

- :mod:`~gamma_net_core.horde.fields`: field paths resolved on any message (no ROS import).
- :mod:`~gamma_net_core.horde.questions`: the questions YAML -> :class:`~gamma_net_core.horde.questions.HordeSpec`.
- :mod:`~gamma_net_core.horde.learner`: :class:`~gamma_net_core.horde.learner.HordeLearner`, Algorithm 1
  vectorized over questions (:mod:`~gamma_net_core.horde.kernels`), with per-question terminations.
- :mod:`~gamma_net_core.horde.readouts`: hyperbolic and windowed returns as weightings over timescales.
- :mod:`~gamma_net_core.horde.online_error`: prediction error against realized returns, online.
- :mod:`~gamma_net_core.horde.adaptive`: Autostep's plain reference, the oracle of the kernel.
"""
