"""The deep half of the core: Γ-nets and probe networks in PyTorch, prioritized n-step replay, the learner.

Modules: ``networks`` (architecture, embeddings, loss scaling), ``td`` (n-step TD errors),
``sum_tree`` and ``replay`` (prioritized replay of raw steps), ``device_sum_tree`` (the sum
tree in a torch tensor, for sampling on a GPU), ``learner`` (config, training, prediction,
checkpoints), ``ensemble`` (K learners of any mix of shapes, one batched update per shape),
``interpolation`` (the probe-network baseline between probes), ``reference`` (plain versions
that test the fast ones). Import the modules themselves: this package imports nothing, so
``gamma-net --help`` stays fast.
"""
