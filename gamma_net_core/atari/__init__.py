"""The Atari study's data side: ALE with the paper's settings, policies and φ, a DQN trainer,
transition recording, evaluation points and Monte-Carlo rollouts (local processes or Ray), and
Dopamine's own network layouts with a reader for its TensorFlow checkpoints (``dopamine``,
``tf_checkpoint``, ``import_dopamine``).

Modules import torch, ale_py and ray only where they need them; import the submodules.
"""

#: Size of φ, the Nature CNN's 512-unit penultimate layer (the paper's Γ-net input).
FEATURE_SIZE = 512
