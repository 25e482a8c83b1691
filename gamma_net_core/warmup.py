"""Compiling the numba kernels ahead of first use, on throwaway learners.

Every kernel is ``numba.njit(cache=True)``: compiled once per machine (and per numba, numpy
and source version), then loaded from numba's cache in well under a second. On an empty cache
the predictor's first update compiled for 20.7 s and its second for 10.3 s on a loaded 2-core
machine, while the node looked alive but took nothing. So compilation happens before a node
takes input: each learning node runs its ``warm_*`` here in a worker thread with its own
settings before it subscribes, and `gamma-net warmup` (run by `make setup`) fills the cache
for every kernel with the argument types the nodes and the offline commands use.

The learners here are new, seeded and thrown away: warming changes nothing a node learned.

Where the cache lives is numba's rule: ``NUMBA_CACHE_DIR`` if set, else ``__pycache__`` beside
each source file when that folder is writable, else the user's cache folder
(``~/.cache/numba``, or ``$XDG_CACHE_HOME/numba``); a read-only install prefix falls back to
the last by itself. :func:`cache_dir` says which one this process uses.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import time
from collections.abc import Callable, Sequence

import numpy as np

from gamma_net_core.linear import GammaNetConfig, LinearGammaNet, uses_ladder
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling, to_gammas


def warm_linear(learner: GammaNetConfig, timescales: TimescaleSampling, *, publish_gammas: Sequence[float]) -> None:
    """The predictor's kernels: TD(0) updates over Gamma_t draws, predictions at the published gammas.

    Args:
      learner: the node's learner settings (the kernels' argument types follow from them).
      timescales: how the node draws Gamma_t.
      publish_gammas: the timescales the node publishes, as gammas.
    """
    rng = np.random.default_rng(0)
    net = LinearGammaNet(learner, rng=rng)
    # As the node draws them: in TD(lambda)'s backward view the sampling's fixed ladder (its traces need one Gamma_t).
    sampler = TimescaleSampler(timescales, rng, fixed=uses_ladder(learner))
    state = np.full(learner.n_state, 0.5)
    for _ in range(2):
        net.learn(state, 0.0, state, False, sampler.sample())
    net.predict(state, np.asarray(publish_gammas, dtype=np.float64))


def warm_horde(spec, *, publish_gammas: Sequence[float] | None = None) -> None:
    """The horde node's kernels: steps, predictions, readouts and the online error of ``spec``'s questions.

    Args:
      spec: a :class:`~gamma_net_core.horde.questions.HordeSpec` (the node's questions file).
      publish_gammas: the published timescales as gammas (default: the spec's ``publish_taus``).
    """
    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.online_error import OnlineError

    learner = HordeLearner.from_spec(spec, rng=np.random.default_rng(0))
    q = learner.n_questions
    if publish_gammas is None:
        gammas = to_gammas(spec.publish_taus, "tau")
    else:
        gammas = np.asarray(publish_gammas, dtype=np.float64)
    inputs = np.full(learner.n_inputs, 0.5)
    readouts = {name: learner.readout_weights(name) for name in learner.readout_names}
    policy = None
    if learner.off_policy:  # TDC's kernel and the ratios (gamma_net_core.horde.policies)
        from gamma_net_core.horde.off_policy_error import ErrorsWithOffPolicy
        from gamma_net_core.horde.policies import PolicyReadings

        policy = PolicyReadings(np.zeros(q), np.zeros(q), np.full(q, 0.5))
        # As the node scores them: RUPEE reads the secondary weights through a kernel of its own, which
        # compiled in the node's loop, after "ready", holding it for seconds.
        errors = ErrorsWithOffPolicy(learner, gammas=gammas, readouts=readouts)
    else:
        errors = OnlineError(gammas=gammas, n_questions=q, readouts=readouts)
    for _ in range(3):
        learner.step(inputs, np.zeros(q), np.ones(q), policy=policy)
        values = learner.predict(inputs, gammas)
        table = np.column_stack([values, *(learner.readout(inputs, name) for name in learner.readout_names)])
        errors.observe(np.zeros(q), np.ones(q), table)


def warm_neural(config) -> None:
    """The neural learner's replay kernels (sum tree, n-step assembly) on a tiny learner of ``config``'s kind.

    Args:
      config: a :class:`~gamma_net_core.neural.learner.NeuralConfig`; its sizes are shrunk here,
        the kernels' argument types do not depend on them.
    """
    from gamma_net_core.neural.learner import NeuralLearner

    small = dataclasses.replace(
        config,
        hidden_sizes=(4,),
        batch_size=2,
        replay_capacity=64,
        n_step=min(config.n_step, 8),
        min_replay_history=4,
        update_period=1,
        target_sync_period=4,
    )
    learner = NeuralLearner(small)
    rng = np.random.default_rng(0)
    for step in range(small.min_replay_history + small.n_step + 4):
        features = rng.random(small.feature_size, dtype=np.float32)
        learner.observe(features, 0.0, terminal=step % 5 == 4)
    n = small.min_replay_history
    learner.observe_many(rng.random((n, small.feature_size), dtype=np.float32), np.zeros(n))


def warm_offline(learner: GammaNetConfig, timescales: TimescaleSampling) -> None:
    """Kernels the offline commands use beside the nodes': a recording learned at once (`arm train`),
    online predictions recorded meanwhile, tile coding of many rows, exact returns.

    Args:
      learner, timescales: the arm study's settings.
    """
    from gamma_net_core.returns import discounted_returns
    from gamma_net_core.tilecoding import TileCoder

    rng = np.random.default_rng(0)
    states = np.full((4, learner.n_state), 0.5)
    LinearGammaNet(learner, rng=rng).learn_recording(
        states_t=states,
        cumulants=np.zeros(4),
        states_tp1=states,
        # As `arm train` draws them: in TD(lambda)'s backward view the ladder, then a draw (linear/laddered.py).
        timescales=TimescaleSampler(timescales, rng, fixed=uses_ladder(learner)),
        probe_gammas=np.array([0.5, 0.9]),
    )

    coder = TileCoder(low=[0.0, 0.0], high=[1.0, 1.0], tilings=[4], widths=[0.5], rng=np.random.default_rng(0))
    coder.active(np.full((3, 2), 0.5))
    discounted_returns(np.zeros(4), np.array([0.5, 0.9]))


def warm_all(*, report: Callable[[str, float], None] | None = None) -> float:
    """Compile (or load) every cached kernel the nodes and commands use, with the shipped YAML files' settings.

    Args:
      report: called with each part's name and its seconds.

    Returns:
      The seconds it took in all.
    """
    from gamma_net_core.config import load_config, load_section
    from gamma_net_core.horde.questions import load_questions
    from gamma_net_core.paths import config_file

    arm = config_file("arm")
    horde = load_questions(config_file("horde"))
    atari = config_file("atari")
    arm_learner = load_config(GammaNetConfig, arm, "predictor", "learner")
    arm_timescales = load_config(TimescaleSampling, arm, "predictor", "timescales")
    parts = {
        "predictor": lambda: warm_linear(
            arm_learner,
            arm_timescales,
            publish_gammas=to_gammas(load_section(arm, "predictor").get("publish_timescales", [10.0]), "tau"),
        ),
        "horde": lambda: warm_horde(horde),
        "horde (autostep)": lambda: warm_horde(_with_adaptation(horde, "autostep")),
        # Off-policy questions learn by TDC, and a predictor with lam > 0 by lambda-returns: kernels of their own.
        "horde (off-policy)": lambda: warm_horde(load_questions(config_file("offpolicy_questions"))),
        "predictor (TD(lambda))": lambda: warm_linear(
            GammaNetConfig(state_low=arm_learner.state_low, state_high=arm_learner.state_high, lam=0.9),
            TimescaleSampling(),
            publish_gammas=[0.9],
        ),
        "neural_predictor": lambda: warm_neural(load_config(NeuralConfig, atari, "neural_predictor", "learner")),
        "offline": lambda: warm_offline(arm_learner, arm_timescales),
    }
    if importlib.util.find_spec("torch") is None:
        del parts["neural_predictor"]  # torch is the neural extra: an install without it has no neural learner
    else:
        from gamma_net_core.neural.learner import NeuralConfig
    began = time.monotonic()
    for name, part in parts.items():
        start = time.monotonic()
        part()
        if report is not None:
            report(name, time.monotonic() - start)
    return time.monotonic() - began


def _with_adaptation(spec, method: str):
    return dataclasses.replace(spec, adaptation=dataclasses.replace(spec.adaptation, method=method))


def cache_dir(module=None) -> pathlib.Path | None:
    """The folder numba caches this process's kernels in (of ``module``'s, default the linear kernels)."""
    if module is None:
        from gamma_net_core.linear import kernels as module
    for value in vars(module).values():
        cache = getattr(value, "_cache", None)
        path = getattr(cache, "cache_path", None) or getattr(cache, "_cache_path", None)
        if path:
            return pathlib.Path(path)
    return None
