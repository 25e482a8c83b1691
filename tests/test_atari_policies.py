"""Policies and the Nature-CNN Q-network: φ, ε-greedy draws, network files and their validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gamma_net_core.atari.networks import NatureQNetwork, load_q_network, random_network, save_q_network
from gamma_net_core.atari.policies import EpsilonGreedyPolicy, Policy, RandomPolicy, load_policy
from gamma_net_core.checkpoint import CheckpointError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def observation(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(4, 84, 84), dtype=np.uint8)


def test_phi_is_the_512_unit_penultimate_layer():
    net = random_network(18, seed=0)
    x = torch.from_numpy(observation())[None]
    q, phi = net.q_and_features(x)
    assert phi.shape == (1, 512) and q.shape == (1, 18)
    assert (phi >= 0).all()  # after the ReLU
    assert torch.allclose(net.head(phi), q) and torch.allclose(net(x), q)


def test_random_network_is_fixed_by_its_seed_and_leaves_torch_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = random_network(6, seed=7)
    after = torch.rand(3)
    assert torch.equal(before, after)
    b = random_network(6, seed=7)
    c = random_network(6, seed=8)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())
    assert not torch.equal(a.phi.weight, c.phi.weight)


def test_epsilon_greedy_is_greedy_except_with_probability_epsilon():
    net = random_network(18, seed=0)
    obs = observation()
    greedy = int(net(torch.from_numpy(obs)[None]).argmax())
    policy = EpsilonGreedyPolicy(net, epsilon=0.5)
    rng = np.random.default_rng(0)
    actions = np.array([policy.act(obs, rng) for _ in range(400)])
    # P(action != greedy) = ε · 17/18 (a random action may be the greedy one); 4 standard deviations.
    rate = float(np.mean(actions != greedy))
    expected = 0.5 * 17 / 18
    assert abs(rate - expected) < 4 * np.sqrt(expected * (1 - expected) / 400)
    # act and act_with_features make the same draws and choices.
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(20):
        action, phi = policy.act_with_features(obs, a)
        assert action == policy.act(obs, b)
    assert np.array_equal(phi, policy.features(obs))
    assert policy.describe()["epsilon"] == 0.5
    assert isinstance(policy, Policy)


def test_random_policy_gives_uniform_actions_and_fixed_features():
    policy = RandomPolicy(5, feature_seed=3)
    assert isinstance(policy, Policy)
    rng = np.random.default_rng(0)
    counts = np.bincount([policy.act(observation(), rng) for _ in range(1000)], minlength=5)
    assert counts.min() > 150
    phi = policy.features(observation(1))
    assert phi.dtype == np.float32 and phi.shape == (512,)
    assert np.array_equal(phi, RandomPolicy(5, feature_seed=3).features(observation(1)))
    assert not np.array_equal(phi, RandomPolicy(5, feature_seed=4).features(observation(1)))


def test_network_file_round_trip_and_a_bare_state_dict(tmp_path):
    net = random_network(9, seed=2)
    save_q_network(tmp_path / "net.pt", net, game="ms_pacman")
    loaded, meta = load_q_network(tmp_path / "net.pt", num_actions=9, game="ms_pacman")
    assert meta["game"] == "ms_pacman"
    x = torch.from_numpy(observation())[None]
    assert torch.equal(loaded(x), net(x))
    torch.save(net.state_dict(), tmp_path / "bare.pt")  # a user's own weights, names as NatureQNetwork's
    policy = load_policy(str(tmp_path / "bare.pt"), num_actions=9, epsilon=0.0)
    assert policy.act(observation(), np.random.default_rng(0)) == int(net(x).argmax())
    assert policy.describe()["kind"] == "q_network" and len(policy.describe()["sha256"]) == 64


def test_bad_network_files_are_refused_with_the_reason(tmp_path):
    net = random_network(9, seed=2)
    save_q_network(tmp_path / "net.pt", net, game="ms_pacman")
    with pytest.raises(CheckpointError, match="9 actions; the game has 18"):
        load_q_network(tmp_path / "net.pt", num_actions=18)
    with pytest.raises(CheckpointError, match="made for 'ms_pacman', not 'centipede'"):
        load_q_network(tmp_path / "net.pt", game="centipede")
    state = net.state_dict()
    state["phi.weight"] = torch.zeros(256, 3136)
    torch.save(state, tmp_path / "shape.pt")
    with pytest.raises(CheckpointError, match=r"'phi.weight' has shape \(256, 3136\)"):
        load_q_network(tmp_path / "shape.pt")
    del state["phi.weight"]
    torch.save(state, tmp_path / "missing.pt")
    with pytest.raises(CheckpointError, match="missing tensors"):
        load_q_network(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(CheckpointError, match=r"junk\.pt"):
        load_q_network(tmp_path / "junk.pt")
    with pytest.raises(FileNotFoundError, match="neither 'random'"):
        load_policy(str(tmp_path / "nope.pt"), num_actions=9)


def test_network_refuses_no_actions():
    with pytest.raises(ValueError, match="num_actions"):
        NatureQNetwork(0)


def make_policy(*, num_actions, game, epsilon):
    """A user's policy factory (importable: the tests folder is on sys.path)."""
    return RandomPolicy(num_actions, feature_seed=11)


def not_a_policy(*, num_actions, game, epsilon):
    return "a string"


def test_a_users_policy_factory():
    policy = load_policy("py:test_atari_policies:make_policy", num_actions=6, game="pong")
    assert isinstance(policy, Policy) and policy.num_actions == 6
    assert policy.describe() == {
        "kind": "python",
        "factory": "test_atari_policies:make_policy",
        "details": {"kind": "random", "feature_seed": 11},
    }
    assert np.array_equal(policy.features(observation()), RandomPolicy(6, feature_seed=11).features(observation()))
    with pytest.raises(ValueError, match="cannot be loaded"):
        load_policy("py:test_atari_policies:nothing_here", num_actions=6)
    with pytest.raises(ValueError, match="returned a str"):
        load_policy("py:test_atari_policies:not_a_policy", num_actions=6)
