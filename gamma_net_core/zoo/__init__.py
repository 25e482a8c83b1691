"""The zoo: prediction problems with known true values, and a runner that scores learners on them.

Each problem (:mod:`gamma_net_core.zoo.problems`) is a seeded stream of transitions and the
true value v(s, gamma) of its states at any gamma: exact on Markov chains, by Monte-Carlo rollouts
on Gymnasium's CartPole (:mod:`gamma_net_core.zoo.cartpole`). Each learner
(:mod:`gamma_net_core.zoo.learners`) is a small adapter building a library learner at its
defaults. The runner (:mod:`gamma_net_core.zoo.runner`) trains every learner on every problem and
reports the relative RMSE at each timescale; `gamma-net zoo` (:mod:`gamma_net_core.zoo.command`)
prints and plots it. Problems and learners are registries: one entry adds one.
"""

from gamma_net_core.zoo.learners import LEARNERS, ZooLearner
from gamma_net_core.zoo.problems import PROBLEMS, FiniteChain, Problem, Transitions, Truth, make, register
from gamma_net_core.zoo.runner import TAUS, TIERS, Result, Tier, mean_errors, relative_rmse, run_tier, run_zoo

__all__ = [
    "LEARNERS",
    "PROBLEMS",
    "TAUS",
    "TIERS",
    "FiniteChain",
    "Problem",
    "Result",
    "Tier",
    "Transitions",
    "Truth",
    "ZooLearner",
    "make",
    "mean_errors",
    "register",
    "relative_rmse",
    "run_tier",
    "run_zoo",
]
