"""The linear learners' defaults on a chain no one tuned them for: each default pinned by a behaviour it buys.

The chain is the sparse one of tests/test_lambda_between.py (25 states, a cumulant of 20 on arriving at
one of them), continuing, with exact values V = (I - gamma P)^-1 P c. The Γ-net codes its one state
input with 8 tilings of 1/16 (fine enough to represent the chain), with loss scaling and a bias unit,
at the step size and Gamma_t the defaults had when the bias was measured (alpha 0.1, 2 + 2 + 2).

The coder, step size and Gamma_t of today's defaults are chosen on the zoo's problems (gamma_net_core/zoo,
docs/choosing-settings.md): the timescale through 16 knots, each a fixed-gamma learner (linear/knots.py,
tests/test_knots.py). Tiles over gamma and tau, the paper's coding, keep the settings the zoo chose for them
before the knots (``TILES``); the tests below pin each by a behaviour on one of the zoo's problems.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_lambda_between import exact, relative_rmse, stationary, stream

from gamma_net_core.linear import FixedTimescaleConfig, GammaNetConfig, LinearGammaNet
from gamma_net_core.linear.settings import saved_learner_mapping
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

LONG_TAUS = (33.0, 60.0, 90.0)
#: tiles over the state, gamma and tau, as the defaults were before the knots: a bias unit, alpha 0.05, Gamma_t
#: two bounds + 4 draws on the gamma scale + 29 on the tau scale
TILES = {"timescale_input": "both", "bias": True, "step_size": 0.05}
DRAWN = TimescaleSampling(n_gamma=4, n_tau=29)
STEPS = 100_000


def long_errors(bias_unit: str, seed: int = 0) -> np.ndarray:
    """Relative RMSE (stationary-weighted) at :data:`LONG_TAUS` after :data:`STEPS` steps of the continuing chain."""
    P, c, _, s = stream("sparse", False, STEPS, seed)
    n = len(c)
    x = ((s + 0.5) / n)[:, None]
    config = GammaNetConfig(state_low=(0.0,), state_high=(1.0,), tilings=(8,), tile_widths=(1 / 16,), memory_size=0,
                            step_size=0.1, bias_unit=bias_unit, timescale_input="both", bias=True)  # fmt: skip
    net = LinearGammaNet(config, rng=np.random.default_rng(seed + 1))
    sampler = TimescaleSampler(TimescaleSampling(n_gamma=2, n_tau=2), np.random.default_rng(seed + 2))
    net.learn_recording(states_t=x[:-1], cumulants=c[s[1:]], states_tp1=x[1:], timescales=sampler)
    states = ((np.arange(n) + 0.5) / n)[:, None]
    d = stationary(P)
    beta = np.ones(n)
    return np.array([relative_rmse(net.predict(states, [1 - 1 / tau])[:, 0], exact(P, c, 1 - 1 / tau, beta), d)
                     for tau in LONG_TAUS])  # fmt: skip


def test_the_bias_is_a_constant_of_the_value_by_default_and_knots_take_none():
    assert GammaNetConfig().bias_unit == "value"
    assert not GammaNetConfig().bias and FixedTimescaleConfig().bias


@pytest.mark.parametrize("seed", [0])
def test_the_value_bias_mends_the_long_timescales_the_scaled_bias_spoils(seed):
    """The paper's bias is a feature of f = (1 - gamma) V, shared by every timescale: each short timescale's
    noisy update of it moves V at tau by tau times as much, and the long timescales end about as far off as
    predicting 0 (relative RMSE 0.82-1.00 here; 0.64-0.81 on seed 1). As a constant of V it moves every
    timescale's value alike (0.08-0.42; seed 1 0.33-0.47)."""
    old = long_errors("scaled", seed)
    new = long_errors("value", seed)
    assert np.all(old > 0.75), old
    assert np.all(new < 0.5) and np.all(new < 0.6 * old), (new, old)


def test_the_coder_step_size_and_sampling_defaults():
    chain = {"state_low": (0.0,), "state_high": (29.0,)}
    for config in (GammaNetConfig(**chain), FixedTimescaleConfig(**chain), FixedTimescaleConfig()):
        # tiles of 1/16 of each input's range, 65,536 features at most: not the arm's 100 tilings of the whole range
        # into 2048
        assert (config.tilings, config.tile_widths, config.memory_size) == ((8,), (0.0625,), 65536)
    # wider where a tiling's tiles would not fit its 8,192 features: with tiles, 2 state inputs and the 2 timescale
    # inputs; with 16 knots, whose copies share the 65,536, four state inputs
    assert GammaNetConfig(timescale_input="both").tile_widths == (0.125,)
    assert GammaNetConfig().tile_widths == (0.0625,)
    cartpole = GammaNetConfig(state_low=(-1.0,) * 4, state_high=(1.0,) * 4)
    assert cartpole.tile_widths == pytest.approx((1 / 3,))
    assert GammaNetConfig(**chain, tilings=(100,), tile_widths=(1.0,)).tile_widths == (1.0,)  # given: as given
    assert GammaNetConfig(state_low=(-1.0,) * 4, state_high=(1.0,) * 4, memory_size=0).tile_widths == (0.0625,)
    # a knot learns as a fixed-gamma learner does, at its alpha; with tiles of 1/16 a timescale's tiles are mostly
    # its own: alpha near the arm's 0.1, not 0.1 over 32 timescales
    assert GammaNetConfig().step_size == FixedTimescaleConfig().step_size == 0.1
    assert GammaNetConfig(timescale_input="both").step_size == 0.05
    assert TimescaleSampling().knots == 16 and (TimescaleSampling().n_gamma, TimescaleSampling().n_tau) == (0, 0)
    from gamma_net_core.linear.knots import default_sampling

    assert default_sampling(GammaNetConfig(timescale_input="both")) == DRAWN


#: The defaults before the zoo chose them: the arm's coder, alpha 0.1, Gamma_t 2 + 2 + 2, the bias of f.
OLD = {
    "tilings": (100,),
    "tile_widths": (1.0,),
    "memory_size": 2048,
    "hashing": "always",
    "step_size": 0.1,
    "bias_unit": "scaled",
    "bias": True,
    "timescale_input": "both",
}
#: The arm's coder at the alpha that suits it (0.1 over 32 timescales): the defaults of the zoo's first round.
ARM = {"tilings": (100,), "tile_widths": (1.0,), "memory_size": 2048, "hashing": "always", "step_size": 0.003,
       "bias": True, "timescale_input": "both"}  # fmt: skip


@pytest.mark.slow
def test_the_default_coder_resolves_a_chain_the_arms_coder_does_not():
    """The zoo's sparse event chain (30 states observed as one input in [0, 29], 1 on entering one state), 30,000
    steps, two seeds: the arm's tiles, as wide as that range, cannot shape the short timescales' values, which
    rise only near that state (worst error over tau 1-100 above 1 at its alpha); tiles of 1/16 of the range
    stay near 0.2 (docs/choosing-settings.md)."""
    from gamma_net_core.zoo import learners, runner

    arm = learners.LinearGammaNetLearner("arm", changes=ARM)
    results = runner.run_zoo(["event_chain_30_s2"], [learners.LinearGammaNetLearner(), arm], steps=30_000,
                             seeds=range(2), modes=("recording",), curve_at=())  # fmt: skip
    error = {name: np.mean([r.error for r in results if r.learner == name], axis=0) for name in ("linear", "arm")}
    assert np.max(error["linear"]) < 0.4, error["linear"]
    assert np.max(error["arm"]) > 0.8, error["arm"]


@pytest.mark.slow
def test_the_defaults_learn_every_timescale_of_a_walk_the_old_ones_do_not():
    """The 19-state random walk of the zoo, 30,000 steps: at the old defaults (the arm's coder, alpha 0.1, Gamma_t
    2 + 2 + 2, the bias of f) the error over tau 1-100 reached 3.6 (mean of three seeds; at 0.1 the 6 timescales'
    summed updates on the shared tiles are noise that loss scaling multiplies by tau); at today's it stays below
    0.5 (docs/choosing-settings.md)."""
    from gamma_net_core.zoo import learners, runner

    old = learners.LinearGammaNetLearner("old", changes=OLD, sampling=TimescaleSampling(n_gamma=2, n_tau=2))
    results = runner.run_zoo(["random_walk_19"], [learners.LinearGammaNetLearner(), old], steps=30_000,
                             seeds=range(3), modes=("recording",), curve_at=())  # fmt: skip
    error = {name: np.mean([r.error for r in results if r.learner == name], axis=0) for name in ("linear", "old")}
    assert np.max(error["linear"]) < 0.5, error["linear"]
    assert np.max(error["linear"]) < 0.3 * np.max(error["old"]), error


def test_the_defaults_predict_no_negative_values_of_an_indicator():
    """A 0/1 cumulant (the zoo's event chain, an indicator of one region): its values are >= 0. At the defaults the
    learned ones are too, within 5 % of the cumulant's range (at alpha 0.5, a reflex's setting, this learner
    diverges on the same stream)."""
    from gamma_net_core.zoo import learners, problems

    problem = problems.make("event_chain_30_s1")
    data = problem.stream(30_000, np.random.default_rng(0))
    assert set(np.unique(data.cumulants)) == {0.0, 1.0}
    gammas = 1.0 - 1.0 / np.array([1.0, 10.0, 100.0])
    predict = learners.LinearGammaNetLearner().train(problem, data, mode="recording", rng=np.random.default_rng(1),
                                                     gammas=gammas)  # fmt: skip
    values = predict(data.obs_t[:2000], gammas)
    assert np.min(values) > -0.05, np.min(values, axis=0)


def test_td_lambda_takes_a_smaller_step_the_further_its_return_reaches():
    """A lambda-return reaches about 1 / (1 - gamma lambda) steps and is that much noisier; at gamma 0 it is the
    one-step target. With knots the forward view steps at alpha (1 - gamma lambda)^0.75 (lambda 0.9 on the zoo: no
    slower than TD(0) over the curve at tau >= 30 on 12 of 14 problems, within 1.5x at the end on 14; at one
    alpha 0.1 sqrt(1 - lambda) 11 and 8; docs/choosing-settings.md), so at gamma 0 it is TD(0). With tiles alpha
    is 0.05 x sqrt(1 - lambda) for every gamma. The backward view steps its traces at alpha (1 - lambda) already;
    a step size given is used as given, also after a round trip through the mapping a checkpoint or YAML file
    holds, and a configuration saved before the per-gamma step loads with one alpha for every gamma."""
    from gamma_net_core import config as config_lib

    knotted = GammaNetConfig(lam=0.9)
    assert (knotted.step_size, knotted.lambda_step_power) == (0.1, 0.75)
    assert GammaNetConfig(lam=0.9, timescale_input="both").step_size == pytest.approx(0.05 * 0.1**0.5)
    assert GammaNetConfig(lam=0.5, timescale_input="both").step_size == pytest.approx(0.05 * 0.5**0.5)
    assert GammaNetConfig(lam=0.9, timescale_input="both").lambda_step_power == 0.0
    assert GammaNetConfig(lam=0.9, lambda_view="backward").step_size == 0.1
    assert GammaNetConfig(lam=0.9, step_size=0.003).step_size == 0.003
    assert GammaNetConfig(lam=0.9, step_size=0.1).step_size == 0.1
    with pytest.raises(ValueError, match=r"lambda_step_power must be -1 \(the default\) or at least 0; got -0.5"):
        GammaNetConfig(lambda_step_power=-0.5)
    saved = config_lib.to_mapping(GammaNetConfig(lam=0.9))
    assert config_lib.from_mapping(GammaNetConfig, {**saved, "lam": 0.5}).step_size == saved["step_size"]
    assert config_lib.from_mapping(GammaNetConfig, {"lam": 0.9}).step_size == GammaNetConfig(lam=0.9).step_size
    before = {k: v for k, v in saved.items() if k != "lambda_step_power"}
    assert saved_learner_mapping(before)["lambda_step_power"] == 0.0


def test_td_lambda_with_knots_steps_each_knot_at_alpha_1_minus_gamma_lambda_to_the_0_75():
    """The per-gamma step, learned: after one transition that ends the episode (the lambda-return is the
    cumulant, as TD(0)'s target is) each knot has moved (1 - gamma lambda)^0.75 as far as TD(0)'s, so the knot of
    tau 1 exactly as far; with one alpha for every gamma each knot moves as far as the others."""
    from gamma_net_core.linear.knots import config_knots

    base = dict(state_low=(0.0,), state_high=(1.0,))
    knots = None
    moved = {}
    for name, changes in {"td0": {}, "lam": {"lam": 0.9}, "one_alpha": {"lam": 0.9, "lambda_step_power": 0.0}}.items():
        cfg = GammaNetConfig(**base, **changes)
        knots = config_knots(cfg)
        net = LinearGammaNet(cfg, rng=np.random.default_rng(1))
        gammas = np.concatenate([knots, knots]) if cfg.lambda_view == "backward" else knots
        net.learn(0.3, 1.0, 0.7, True, gammas)
        moved[name] = net.predict(0.3, knots)
    np.testing.assert_allclose(moved["lam"] / moved["td0"], (1.0 - 0.9 * knots) ** 0.75, rtol=1e-12)
    assert moved["lam"][0] == moved["td0"][0]
    np.testing.assert_allclose(moved["one_alpha"], moved["one_alpha"][0], rtol=1e-12)


def test_tiles_that_fit_their_memory_are_not_hashed():
    """``hashing: when_needed`` (the default) gives each tile its own weight wherever the tiles fit in
    ``memory_size``: the default coder always fits (8 tilings of 17^3 tiles for one state input and the two
    timescale inputs; 4^6 for CartPole's four at 1/3). Hashed, two tiles may share a weight."""
    from gamma_net_core.linear import LinearGammaNet

    chain = {"state_low": (0.0,), "state_high": (29.0,)}
    rng = np.random.default_rng(0)
    assert GammaNetConfig().hashing == "when_needed"
    # 16 knots, each a copy of the state's tiles: 8 tilings of 17 tiles for one input, of 4^4 for CartPole's four
    assert LinearGammaNet(GammaNetConfig(**chain), rng=rng).n_features == 16 * 8 * 17
    cartpole = GammaNetConfig(state_low=(-1.0,) * 4, state_high=(1.0,) * 4)
    assert LinearGammaNet(cartpole, rng=rng).n_features == 16 * 8 * 4**4
    chain = {**chain, "timescale_input": "both", "bias": True}
    assert LinearGammaNet(GammaNetConfig(**chain), rng=rng).n_features == 8 * 17**3 + 1
    cartpole = GammaNetConfig(state_low=(-1.0,) * 4, state_high=(1.0,) * 4, timescale_input="both", bias=True)
    assert LinearGammaNet(cartpole, rng=rng).n_features == 8 * 4**6 + 1
    # too many tiles for the memory, or hashing asked for: hashed into memory_size, plus the bias
    assert LinearGammaNet(GammaNetConfig(**chain, memory_size=4096), rng=rng).n_features == 4096 + 1
    assert LinearGammaNet(GammaNetConfig(**chain, hashing="always"), rng=rng).n_features == 65536 + 1


def test_a_checkpoint_from_before_hashing_existed_codes_as_it_did(tmp_path):
    """A configuration saved before ``hashing`` existed hashed whenever ``memory_size`` > 0: it loads so."""
    from gamma_net_core.checkpoint import load_npz, save_npz
    from gamma_net_core.linear.checkpoints import VERSION

    net = LinearGammaNet(GammaNetConfig(state_low=(0.0,), state_high=(29.0,), hashing="always", **TILES),
                         rng=np.random.default_rng(1))  # fmt: skip
    x = np.linspace(0.0, 29.0, 200)[:, None]
    sampler = TimescaleSampler(DRAWN, np.random.default_rng(2))
    net.learn_recording(states_t=x[:-1], cumulants=np.sin(x[1:, 0]), states_tp1=x[1:], timescales=sampler)
    path = net.save(tmp_path / "net.npz")
    saved, arrays, meta = load_npz(path, kind=net.kind, version=VERSION)
    assert saved.pop("hashing") == "always"
    save_npz(path, kind=net.kind, version=VERSION, config=saved, arrays=arrays, meta=meta)
    again = LinearGammaNet.load(path)
    assert again.config.hashing == "always" and again.n_features == 65536 + 1
    np.testing.assert_array_equal(again.predict(x, [0.0, 0.99]), net.predict(x, [0.0, 0.99]))


@pytest.mark.slow
def test_unhashed_tiles_mend_the_long_timescales_that_collisions_spoil():
    """The zoo's 19-state random walk, 30,000 steps, three seeds. Hashed into 65,536, a few tiles share a weight
    with another timescale's; with loss scaling a short timescale's share moves the long one's value by up to tau
    times as much, and the error over tau 1-100 spikes where that happens (0.81 at tau 90 on one seed). One weight
    per tile, the same tiles, alpha and draws: no spike (docs/choosing-settings.md)."""
    from gamma_net_core.zoo import learners, runner

    hashed = learners.LinearGammaNetLearner("hashed", changes={**TILES, "hashing": "always"}, sampling=DRAWN)
    tiles = learners.LinearGammaNetLearner("linear", changes=TILES, sampling=DRAWN)
    results = runner.run_zoo(["random_walk_19"], [tiles, hashed], steps=30_000,
                             seeds=range(3), modes=("recording",), curve_at=())  # fmt: skip
    error = {name: np.mean([r.error for r in results if r.learner == name], axis=0) for name in ("linear", "hashed")}
    assert np.max(error["linear"]) < 0.25, error["linear"]
    assert np.max(error["hashed"]) > 1.5 * np.max(error["linear"]), error


@pytest.mark.slow
def test_four_draws_on_the_gamma_scale_learn_the_short_timescales_one_leaves_behind():
    """The zoo's AR(1) chain (cumulant x'), 30,000 steps, three seeds. Tiles over gamma are narrow in tau at
    short timescales (gamma 0.5 +- 1/32 is tau 1.9-2.1), and the arm's Gamma_t (one gamma-scale draw, 29 on
    tau) trains each about once in ten steps: at tau 2-10 the error was 0.23-0.28 on every seed of five. Four
    draws on the gamma scale bring it to 0.13-0.17 at the same long-timescale error (docs/choosing-settings.md)."""
    from gamma_net_core.zoo import learners, runner

    arm = learners.LinearGammaNetLearner("arm_draws", changes=TILES, sampling=TimescaleSampling(n_gamma=1, n_tau=29))
    tiles = learners.LinearGammaNetLearner("linear", changes=TILES, sampling=DRAWN)
    results = runner.run_zoo(["ar1_x"], [tiles, arm], steps=30_000, seeds=range(3),
                             modes=("recording",), curve_at=())  # fmt: skip
    taus = list(results[0].taus)
    short = [taus.index(t) for t in (2.0, 3.0, 5.0, 7.0, 10.0)]
    error = {name: np.mean([r.error for r in results if r.learner == name], axis=0) for name in ("linear", "arm_draws")}
    assert np.max(error["linear"][short]) < 0.22, error["linear"]
    assert np.max(error["arm_draws"][short]) > 1.25 * np.max(error["linear"][short]), error
    assert np.max(error["linear"]) < 0.35, error["linear"]
