"""The Atari study's data side: ALE with the paper's settings, policies and φ, a DQN trainer,
transition recording, evaluation points and Monte-Carlo rollouts (local processes or Ray), and
Dopamine's own network layouts with a reader for its TensorFlow checkpoints (``dopamine``,
``tf_checkpoint``, ``import_dopamine``).

MinAtar (Young and Tian 2019) is a second domain of the same pipeline (``minatar``,
``minatar_network``): a game named ``minatar-<game>`` plays MinAtar instead of ALE
(:mod:`gamma_net_core.atari.domains` chooses), and everything else is unchanged.

Modules import torch, ale_py, minatar and ray only where they need them; import the submodules.
"""

#: Size of φ, the Nature CNN's 512-unit penultimate layer (the paper's Γ-net input).
FEATURE_SIZE = 512

#: Size of φ for MinAtar: the reference network's 128-unit hidden layer (MinAtar paper).
MINATAR_FEATURE_SIZE = 128

#: MinAtar's games as the pipeline names them (``--game``): ``minatar-`` and MinAtar's module name.
MINATAR_GAMES = (
    "minatar-asterix",
    "minatar-breakout",
    "minatar-freeway",
    "minatar-seaquest",
    "minatar-space-invaders",
)
