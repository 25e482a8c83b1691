"""The learners the zoo runs, each a small adapter from a problem's stream to the library's learner.

An adapter trains one learner on one problem's transitions and returns what predicts with it:
``predict(obs [N, n_inputs], gammas [G]) -> [N, G]``, in the cumulant's units. It builds the
learner as a new user would: the library's configuration at its defaults, with only what the
problem dictates filled in (the observation's range for a tile coder, the feature size for a
network). ``changes`` overrides any setting by name, to measure other settings on the same zoo::

    LinearGammaNetLearner("linear_bias_off", changes={"bias": False})

Two ways to feed a learner, ``mode``: ``recording``, the whole stream at once (the library's
``learn_recording`` / ``observe_many``), and ``online``, one transition at a time (``learn`` /
``observe``), as a node feeds it. An adapter lists the modes it has.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling
from gamma_net_core.zoo.problems import Problem, Transitions

#: How a trained learner is read: observations [N, n_inputs] and gammas [G] -> values [N, G].
Predict = Callable[[np.ndarray, np.ndarray], np.ndarray]

MODES = ("recording", "online")


class ZooLearner(abc.ABC):
    """One learner the zoo can train on any problem.

    Attributes:
      name: the name in the zoo's tables and registry.
      description: one line.
      modes: the ways it can be fed (a subset of :data:`MODES`).
    """

    name: str = ""
    description: str = ""
    modes: tuple[str, ...] = MODES
    #: whether :meth:`train` takes ``checkpoints`` and ``at_checkpoint`` (a learning curve: the zoo measures the
    #: learner part way through the stream as well as at its end)
    curves: bool = False

    def __init__(self, name: str | None = None, *, changes: Mapping[str, Any] | None = None) -> None:
        if name is not None:
            self.name = name
        self.changes = dict(changes or {})

    @abc.abstractmethod
    def train(
        self, problem: Problem, data: Transitions, *, mode: str, rng: np.random.Generator, gammas: np.ndarray
    ) -> Predict:
        """Learn from ``data`` (a stream of ``problem``) fed as ``mode`` says; return its predictions.

        Args:
          gammas: the timescales it will be asked about: a learner of one fixed timescale trains one
            per gamma; a Γ-net learns every timescale and need not look.
        """


class LinearGammaNetLearner(ZooLearner):
    """The linear Γ-net (:class:`~gamma_net_core.linear.LinearGammaNet`) at ``GammaNetConfig()``, Gamma_t drawn by
    ``TimescaleSampling()``; ``sampling`` replaces the latter."""

    name = "linear"
    description = "linear Γ-net, GammaNetConfig() defaults, Gamma_t ~ TimescaleSampling()"

    def __init__(self, name=None, *, changes=None, sampling: TimescaleSampling | None = None, decay=False) -> None:
        super().__init__(name, changes=changes)
        self.sampling = sampling  # None: the config's default (linear/knots.py: default_sampling)
        self.decay = decay

    def config(self, problem: Problem, steps: int = 0):
        from gamma_net_core.linear import GammaNetConfig

        decay = {"step_size_decay_steps": steps} if self.decay else {}
        return GammaNetConfig(state_low=tuple(problem.low), state_high=tuple(problem.high), **self.changes, **decay)

    curves = True

    def train(self, problem, data, *, mode, rng, gammas, checkpoints=(), at_checkpoint=None):
        """As :meth:`ZooLearner.train`; after each of ``checkpoints`` (transitions learned, in (0, steps)) it calls
        ``at_checkpoint(step, predict)``. A recording is then learned in pieces: the same updates, since the
        learner keeps its forward view's window and its step count between calls, and the sampler its draws."""
        from gamma_net_core.linear import LinearGammaNet, uses_ladder

        config = self.config(problem, data.steps)
        net = LinearGammaNet(config, rng=rng)
        from gamma_net_core.linear.knots import default_sampling

        sampling = self.sampling or default_sampling(config)
        sampler = TimescaleSampler(sampling, rng, fixed=uses_ladder(config))

        def predict(obs, gammas):
            return net.predict(obs, gammas)

        stops = [k for k in sorted(set(int(c) for c in checkpoints)) if 0 < k < data.steps] + [data.steps]
        start = 0
        for stop in stops:
            if mode == "recording":
                piece = slice(start, stop)
                net.learn_recording(
                    states_t=data.obs_t[piece], cumulants=data.cumulants[piece], states_tp1=data.obs_tp1[piece],
                    timescales=sampler, terminals=data.terminals[piece],
                )  # fmt: skip
            else:
                for t in range(start, stop):
                    net.learn(
                        data.obs_t[t], data.cumulants[t], data.obs_tp1[t], bool(data.terminals[t]), sampler.sample()
                    )
            if stop < data.steps and at_checkpoint is not None:
                at_checkpoint(stop, predict)
            start = stop
        return predict


class FixedTimescaleLearner(ZooLearner):
    """The fixed-gamma TD(0) baseline (:class:`~gamma_net_core.linear.FixedTimescaleTD`) at ``FixedTimescaleConfig()``:
    one learner trained on each gamma alone, so it predicts only the gammas it was trained on."""

    name = "td0_fixed"
    description = "fixed-gamma TD(0), FixedTimescaleConfig() defaults, one learner per tau"
    #: one learner per tau makes it the slowest online; its online updates equal its recording's (the
    #: library's tests hold them equal), so the zoo feeds it the recording only
    modes = ("recording",)

    def __init__(self, name=None, *, changes=None, decay=False) -> None:
        super().__init__(name, changes=changes)
        self.decay = decay

    def train(self, problem, data, *, mode, rng, gammas):
        from gamma_net_core.linear import FixedTimescaleConfig, FixedTimescaleTD

        nets = {}
        decay = {"step_size_decay_steps": data.steps} if self.decay else {}
        for gamma in np.atleast_1d(gammas):
            config = FixedTimescaleConfig(
                state_low=tuple(problem.low), state_high=tuple(problem.high), gamma=float(gamma), **self.changes,
                **decay,
            )  # fmt: skip
            net = FixedTimescaleTD(config, rng=rng)
            if mode == "recording":
                net.learn_recording(
                    states_t=data.obs_t, cumulants=data.cumulants, states_tp1=data.obs_tp1, terminals=data.terminals
                )
            else:
                for t in range(data.steps):
                    net.learn(data.obs_t[t], data.cumulants[t], data.obs_tp1[t], bool(data.terminals[t]))
            nets[float(gamma)] = net

        def predict(obs, gs):
            return np.stack([np.atleast_1d(nets[float(g)].predict(obs)) for g in np.atleast_1d(gs)], axis=1)

        return predict


class HordeLearner(ZooLearner):
    """A Horde (:class:`~gamma_net_core.horde.learner.HordeLearner`) of one question, the problem's own, at its
    defaults; it learns one transition at a time, so it has one mode."""

    name = "horde"
    description = "Horde of one question, a questions file's defaults (no bias unit) and TimescaleSampling()'s"
    modes = ("online",)

    def __init__(
        self, name=None, *, changes=None, adaptation=None, timescales: TimescaleSampling | None = None
    ) -> None:
        super().__init__(name, changes=changes)
        self.adaptation = adaptation  # an AdaptationConfig (Autostep), or None: the constant alpha
        self.timescales = timescales  # None: TimescaleSampling()

    def train(self, problem, data, *, mode, rng, gammas):
        from gamma_net_core.horde.learner import HordeLearner as Horde
        from gamma_net_core.linear import GammaNetConfig

        # As a questions file without a bias: key gets it (horde/questions.py): a Horde's kernels have only the
        # paper's bias, so none unless asked for, and then that one.
        defaults = {"bias": False} if "bias" not in self.changes else {"bias_unit": "scaled"}
        config = GammaNetConfig(
            state_low=tuple(problem.low), state_high=tuple(problem.high), **{**defaults, **self.changes}
        )
        horde = Horde(config, names=("question",), rng=rng, adaptation=self.adaptation, timescales=self.timescales)
        one = np.ones(1)
        for t in range(data.steps):
            continuation = np.zeros(1) if data.terminals[t] else one
            horde.learn(data.obs_t[t], data.cumulants[t : t + 1], data.obs_tp1[t], continuation)

        def predict(obs, gammas):
            return np.stack([horde.predict(o, gammas)[0] for o in np.asarray(obs)])

        return predict


#: the most inputs the ``tiles`` features give a network (more tiles are hashed into this many)
MAX_TILE_FEATURES = 4096


class NeuralLearner(ZooLearner):
    """The neural Γ-net (:class:`~gamma_net_core.neural.learner.NeuralLearner`) at ``NeuralConfig()``, seeded per
    run. Its replay sees ``steps`` transitions of the stream at most (:attr:`budget`): a network on a CPU is slow.

    ``features`` says what it sees of an observation (``feature_size`` is theirs):

    - ``problem``: the problem's own features (:meth:`Problem.features`): one-hot states for a chain, the
      observation scaled to [0, 1] otherwise.
    - ``raw``: the observation scaled to [0, 1], what the linear Γ-net's tile coder is given (a chain's
      state index as one input).
    - ``tiles``: the linear Γ-net's state tiles as a binary vector: a tile coder with ``GammaNetConfig()``'s
      tilings and state tile widths over the state inputs alone, drawn from the run's generator; the network
      gets the timescale as its own input. The linear Γ-net's features less the timescale, so the two compare
      like for like: one feature per tile, or hashed into :data:`MAX_TILE_FEATURES` where there are more
      tiles (a dense input of the linear Γ-net's 65,536 would take gigabytes a stream).
    """

    name = "neural"
    description = "neural Γ-net, NeuralConfig() defaults, on one-hot / scaled features"
    FEATURES = ("problem", "raw", "tiles")
    DESCRIPTIONS: ClassVar[dict[str, str]] = {
        "problem": description,
        "raw": "neural Γ-net, NeuralConfig() defaults, on the observation scaled to [0, 1] (the linear's input)",
        "tiles": "neural Γ-net, NeuralConfig() defaults, on the linear Γ-net's state tiles (binary)",
    }

    def __init__(self, name=None, *, changes=None, budget: int | None = None, features: str = "problem") -> None:
        super().__init__(name, changes=changes)
        if features not in self.FEATURES:
            raise ValueError(f"unknown neural zoo features {features!r}; known: {', '.join(self.FEATURES)}")
        self.budget = budget
        self.features = features
        self.description = self.DESCRIPTIONS[features]
        if features != "problem":
            # a comparison on other features: the online feed makes the same updates (neural's online seed
            # checks that), so these spend the budget on seeds
            self.modes = ("recording",)

    def featurizer(self, problem: Problem, rng: np.random.Generator) -> Callable[[np.ndarray], np.ndarray]:
        """What the network sees of observations [N, n_inputs]: float32 [N, feature_size]."""
        if self.features == "problem":
            return lambda obs: problem.features(obs).astype(np.float32)
        if self.features == "raw":
            return lambda obs: Problem.features(problem, obs).astype(np.float32)
        from gamma_net_core.linear import GammaNetConfig
        from gamma_net_core.linear.coding import coder_layout
        from gamma_net_core.tilecoding import TileCoder

        config = GammaNetConfig(state_low=tuple(problem.low), state_high=tuple(problem.high))
        low, high, widths = coder_layout(config, "none")  # the state inputs' ranges and tile widths
        seed = int(rng.integers(2**31))  # the same offsets whether or not the tiles are then hashed
        coder = TileCoder(low=low, high=high, tilings=config.tilings, widths=widths, memory_size=0,
                          rng=np.random.default_rng(seed))  # fmt: skip
        if coder.n_features > MAX_TILE_FEATURES:
            coder = TileCoder(low=low, high=high, tilings=config.tilings, widths=widths,
                              memory_size=MAX_TILE_FEATURES, rng=np.random.default_rng(seed))  # fmt: skip

        def tiles(obs):
            active = coder.active(np.asarray(obs, dtype=np.float64))
            phi = np.zeros((active.shape[0], coder.n_features), dtype=np.float32)
            np.put_along_axis(phi, active, 1.0, axis=1)
            return phi

        return tiles

    def train(self, problem, data, *, mode, rng, gammas):
        from gamma_net_core.neural.learner import NeuralConfig
        from gamma_net_core.neural.learner import NeuralLearner as Neural

        steps = data.steps if self.budget is None else min(self.budget, data.steps)
        featurize = self.featurizer(problem, rng)
        phi = featurize(data.obs_t[:steps])
        changes = {"seed": int(rng.integers(2**31)), **self.changes}
        learner = Neural(NeuralConfig(feature_size=phi.shape[1], **changes))
        cumulants, terminals = data.cumulants[:steps], data.terminals[:steps]
        if mode == "recording":
            learner.observe_many(phi, cumulants, terminals)
        else:
            for t in range(steps):
                learner.observe(phi[t], float(cumulants[t]), terminal=bool(terminals[t]))
        return lambda obs, gammas: learner.predict(featurize(obs), gammas)


# ------------------------------------------------------------------------------------------- registry

#: name -> a factory of the adapter.
LEARNERS: dict[str, Callable[[], ZooLearner]] = {}


def register(name: str, factory: Callable[[], ZooLearner]) -> None:
    """Add a learner to the zoo under ``name`` (refusing a name already taken)."""
    if name in LEARNERS:
        raise ValueError(f"a zoo learner named {name!r} exists already")
    LEARNERS[name] = factory


def make(name: str) -> ZooLearner:
    """The learner adapter registered as ``name``.

    Raises:
      ValueError: one line naming an unknown learner and the known ones.
    """
    if name not in LEARNERS:
        raise ValueError(f"unknown zoo learner {name!r}; known: {', '.join(sorted(LEARNERS))}")
    learner = LEARNERS[name]()
    learner.name = name
    return learner


register("linear", LinearGammaNetLearner)
#: not a default: the linear Γ-net with the paper's arm coder (100 tilings of width 1.0 hashed into 2048) at the
#: alpha that suits it (0.1 over the 32 timescales of Gamma_t), the defaults before the zoo chose a finer coder
ARM_CODER = {"tilings": (100,), "tile_widths": (1.0,), "memory_size": 2048, "hashing": "always", "step_size": 0.003}
register(
    "linear_arm",
    lambda: LinearGammaNetLearner(
        changes={**ARM_CODER, "timescale_input": "both", "bias": True}, sampling=TimescaleSampling(n_gamma=4, n_tau=29)
    ),
)
#: not a default: the defaults before the knots (linear/knots.py), tiles over the state, gamma and tau at alpha 0.05,
#: a bias unit, Gamma_t two bounds + 4 draws on the gamma scale + 29 on the tau scale
TILES = {"timescale_input": "both", "bias": True, "step_size": 0.05}
DRAWN = TimescaleSampling(n_gamma=4, n_tau=29)
register("linear_tiles", lambda: LinearGammaNetLearner(changes=TILES, sampling=DRAWN))
register("horde_tiles", lambda: HordeLearner(changes={**TILES, "bias": False}, timescales=DRAWN))
register("linear_lam0.5", lambda: LinearGammaNetLearner(changes={"lam": 0.5}))
register("linear_lam0.9", lambda: LinearGammaNetLearner(changes={"lam": 0.9}))
register("horde", HordeLearner)
register("neural", NeuralLearner)
register("neural_raw", lambda: NeuralLearner(features="raw"))
register("neural_tiles", lambda: NeuralLearner(features="tiles"))
register("td0_fixed", FixedTimescaleLearner)
#: not defaults: the recipe for a recording (docs/choosing-settings.md), alpha 0.2 decayed linearly to 0 over the
#: stream, for the Γ-net and for the baseline alike
RECORDING_RECIPE = {"step_size": 0.2}
register("linear_decay", lambda: LinearGammaNetLearner(changes=RECORDING_RECIPE, decay=True))
register("td0_fixed_decay", lambda: FixedTimescaleLearner(changes=RECORDING_RECIPE, decay=True))
