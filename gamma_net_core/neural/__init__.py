"""The deep half of the core: Γ-nets and probe networks in PyTorch, prioritized n-step replay, the learner.

Modules: ``networks`` (architecture, embeddings, loss scaling), ``td`` (n-step TD errors),
``sum_tree`` and ``replay`` (prioritized replay of raw steps), ``device_sum_tree`` (the sum
tree in a torch tensor, for sampling on a GPU), ``learner`` (config, training, prediction,
checkpoints), ``ensemble`` (K learners of any mix of shapes, one batched update per shape),
``interpolation`` (the probe-network baseline between probes), ``reference`` (plain versions
that test the fast ones). Import the modules themselves: this package imports nothing, so
``gamma-net --help`` stays fast.

torch is the ``neural`` extra of the distribution, not a requirement (a bare ``pip install``
of torch pulls a CUDA build): without it, importing any module here fails at once with one
line that says how to install it, not deep inside a module.
"""

import importlib.util

#: What to do when torch is missing: the extra, and the CPU-only route first (README, "Install").
INSTALL_HINT = (
    "the neural learner needs torch, the 'neural' extra: pip install 'gamma_net_ros[neural]' (for a CPU-only "
    "torch, first: pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)"
)

if importlib.util.find_spec("torch") is None:
    raise ModuleNotFoundError(INSTALL_HINT, name="torch")
