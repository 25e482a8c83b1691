"""The zoo's neural learners: the features each is fed, the linear Γ-net's tiles among them, and a short run."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.zoo import learners as zoo_learners
from gamma_net_core.zoo import problems as zoo_problems
from gamma_net_core.zoo.runner import TIERS, run_zoo

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_tiles_learner_sees_the_linear_gamma_nets_state_tiles_as_a_binary_vector():
    problem = zoo_problems.make("random_walk_19")
    learner = zoo_learners.make("neural_tiles")
    featurize = learner.featurizer(problem, np.random.default_rng(0))
    obs = np.arange(19.0)[:, None]
    phi = featurize(obs)
    config = GammaNetConfig(state_low=tuple(problem.low), state_high=tuple(problem.high))
    # one feature per tile (8 tilings of 17 tiles over one input), not the linear Γ-net's 65,536 hashed slots
    assert phi.dtype == np.float32 and phi.shape[0] == 19 and phi.shape[1] <= zoo_learners.MAX_TILE_FEATURES
    assert set(np.unique(phi)) == {0.0, 1.0}
    # exactly one active tile per tiling (unhashed: nothing folds two into one), no bias: the network has its own
    np.testing.assert_array_equal(phi.sum(axis=1), sum(config.tilings))
    np.testing.assert_array_equal(featurize(obs[3:4]), phi[3:4])
    # four inputs (CartPole): wider tiles, still one feature per tile within MAX_TILE_FEATURES
    cartpole = zoo_problems.make("cartpole")
    many = learner.featurizer(cartpole, np.random.default_rng(0))(np.zeros((2, len(cartpole.low))))
    assert many.shape[1] <= zoo_learners.MAX_TILE_FEATURES
    np.testing.assert_array_equal(many.sum(axis=1), sum(config.tilings))
    # neighbours share most tiles, far states fewer: the linear coder's generalization, not one-hot's
    shared = phi @ phi.T
    assert shared[9, 10] > shared[0, 18]


def test_the_raw_learner_sees_the_observation_scaled_as_the_linear_gamma_net_does():
    problem = zoo_problems.make("random_walk_19")
    phi = zoo_learners.make("neural_raw").featurizer(problem, np.random.default_rng(0))(np.array([[0.0], [18.0]]))
    np.testing.assert_allclose(phi, [[0.0], [1.0]])
    one_hot = zoo_learners.make("neural").featurizer(problem, np.random.default_rng(0))(np.array([[3.0]]))
    assert one_hot.shape == (1, 19) and one_hot[0, 3] == 1.0


def test_unknown_features_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^unknown neural zoo features 'pixels'; known: problem, raw, tiles$"):
        zoo_learners.NeuralLearner(features="pixels")


def test_the_full_tier_runs_the_neural_learner_on_the_linear_gamma_nets_features_too():
    assert {"neural", "neural_tiles"} <= set(TIERS["full"].learners)
    assert zoo_learners.make("neural").modes == ("recording", "online")
    assert zoo_learners.make("neural_tiles").modes == zoo_learners.make("neural_raw").modes == ("recording",)


@pytest.mark.slow
def test_the_tiles_learner_learns_a_walk():
    small = {"hidden_sizes": (32, 32), "min_replay_history": 200, "update_period": 2, "batch_size": 32}
    learner = zoo_learners.NeuralLearner("tiles", changes=small, features="tiles")
    (result,) = run_zoo(["random_walk_5"], [learner], steps=3_000, modes=("recording",), taus=[1.0, 10.0, 100.0])
    assert np.all(np.asarray(result.error) < 0.5), result.error


@pytest.mark.slow
def test_the_average_of_the_weights_brings_the_long_timescales_closer_on_the_linear_gamma_nets_tiles():
    """On the ring with a rare cumulant, fed the linear Γ-net's tiles, the network's long timescales keep
    moving about the values at a constant step size: the default's average of the weights (decay 0.99)
    predicts closer to them than the network itself (average_decay 0), same stream, same updates."""
    plain = zoo_learners.NeuralLearner("plain", features="tiles", changes={"average_decay": 0.0})
    averaged = zoo_learners.NeuralLearner("averaged", features="tiles")
    results = run_zoo(["rare_ring_30"], [plain, averaged], steps=24_000, seeds=[0], taus=[30.0, 60.0, 100.0],
                      modes=("recording",))  # fmt: skip
    error = {r.learner: np.asarray(r.error) for r in results}
    assert error["averaged"].mean() < 0.8 * error["plain"].mean(), error
