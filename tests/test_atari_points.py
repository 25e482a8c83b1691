"""Evaluation points and Monte-Carlo returns: the paper's schedule, exact restores, hand-computed returns, Ray."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gamma_net_core.atari.env import AtariConfig, AtariEnv
from gamma_net_core.atari.evaluation_points import EvaluationPoints, make_points
from gamma_net_core.atari.networks import random_network, save_q_network
from gamma_net_core.atari.policies import RandomPolicy
from gamma_net_core.atari.rollouts import (
    END_HORIZON,
    MonteCarloReturns,
    RolloutSpec,
    RolloutWorker,
    default_horizon,
    monte_carlo_returns,
)
from gamma_net_core.cli import main
from gamma_net_core.config import to_mapping

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CONFIG = AtariConfig(max_episode_steps=150)


@pytest.fixture(scope="module")
def points_file(tmp_path_factory):
    points = make_points(CONFIG, RandomPolicy(18), episodes=2, seed=4)
    path = tmp_path_factory.mktemp("points") / "points.npz"
    points.save(path)
    return path


def test_points_follow_the_papers_schedule(points_file):
    points = EvaluationPoints.load(points_file)
    assert len(points.offsets) == 2
    for episode, offset in enumerate(points.offsets):
        assert 10 <= offset < 100
        steps = points.steps[points.episodes == episode].tolist()
        # The start state, then every 30 steps from the offset, while the episode lasts (150 steps here).
        assert steps == [0, *range(offset, 150, 30)]
    assert points.features.shape == (len(points), 512) and points.features.dtype == np.float32
    assert points.config["game"] == "centipede" and points.config["interval"] == 30


def test_points_file_round_trip(points_file, tmp_path):
    points = EvaluationPoints.load(points_file)
    points.save(tmp_path / "again.npz")
    again = EvaluationPoints.load(tmp_path / "again.npz")
    assert again.config == points.config and again.offsets == points.offsets
    for a, b in zip(points.states, again.states):
        assert a.ale_state == b.ale_state and np.array_equal(a.frames, b.frames) and a.sticky_rng == b.sticky_rng
    assert np.array_equal(again.features, points.features)


def test_restoring_a_point_and_replaying_the_policy_reaches_the_next_point_exactly(points_file):
    """Environment and agent state restore exactly: 30 steps on, the next saved point is reproduced bit for bit."""
    points = EvaluationPoints.load(points_file)
    env = AtariEnv(CONFIG, seed=12345)  # a fresh emulator, another seed
    policy = RandomPolicy(18)
    for i in range(len(points) - 1):
        if points.episodes[i] != points.episodes[i + 1]:
            continue
        observation = env.set_state(points.states[i])
        rng = np.random.default_rng()
        rng.bit_generator.state = points.policy_rng[i]
        assert np.array_equal(policy.features(observation), points.features[i])
        for _ in range(points.steps[i + 1] - points.steps[i]):
            observation = env.step(policy.act(observation, rng)).observation
        reached, target = env.get_state(), points.states[i + 1]
        assert np.array_equal(reached.frames, target.frames)
        assert reached.ale_state == target.ale_state
        assert reached.sticky_rng == target.sticky_rng and rng.bit_generator.state == points.policy_rng[i + 1]


class ScriptedPolicy:
    """Plays a fixed action sequence, cyclically (one cycle per rollout when the rollout is as long)."""

    num_actions, feature_size = 18, 512

    def __init__(self, actions):
        self.actions, self.t = list(actions), 0

    def act(self, observation, rng):
        action = self.actions[self.t % len(self.actions)]
        self.t += 1
        return action


def test_monte_carlo_return_equals_the_hand_computed_discounted_sum():
    from ale_py import ALEInterface, ALEState, LoggerMode, roms

    config = AtariConfig(sticky_action_probability=0.0)  # deterministic: every rollout is the same
    short = AtariConfig(sticky_action_probability=0.0, max_episode_steps=60)
    points = make_points(short, RandomPolicy(18), episodes=1, seed=0)
    state = points.states[1]
    horizon = 120
    actions = [1, 1, 3, 1, 4, 1, 11, 12] * 15  # mostly FIRE: Centipede scores within a few steps
    gammas = (0.0, 0.5, 0.9, 0.99)
    spec = RolloutSpec(to_mapping(config), "random", 0.0, 0, gammas, horizon, seed=0)
    worker = RolloutWorker(spec, policy=ScriptedPolicy(actions))
    _, _, returns, lengths, ends = worker.run(1, state, [0, 1, 2])
    # By hand: the raw emulator from the point's state, 4 frames per action, rewards summed per step.
    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(str(roms.get_rom_path("centipede")))
    ale.restoreState(ALEState(state.ale_state))
    action_set = ale.getMinimalActionSet()
    rewards = [sum(ale.act(action_set[a]) for _ in range(4)) for a in actions]
    assert not ale.game_over() and sum(rewards) > 0 and rewards[0] == 0 < max(rewards)
    expected = [sum(gamma**k * r for k, r in enumerate(rewards)) for gamma in gammas]
    assert lengths.tolist() == [horizon] * 3 and (ends == END_HORIZON).all()
    for k in range(3):
        assert returns[k] == pytest.approx(expected, rel=1e-12)
    # The clipped cumulant (Dopamine's reward, as the recordings' second column): the same play, rewards in [-1, 1].
    assert max(rewards) > 1
    clipped = RolloutWorker(dataclasses.replace(spec, cumulant="clipped"), policy=ScriptedPolicy(actions))
    _, _, clipped_returns, _, _ = clipped.run(1, state, [0])
    expected = [sum(gamma**k * min(r, 1.0) for k, r in enumerate(rewards)) for gamma in gammas]
    assert clipped_returns[0] == pytest.approx(expected, rel=1e-12)


def test_default_horizon_is_where_the_largest_probe_gamma_weighs_below_1e_4():
    h = default_horizon()
    assert h == 917 and 0.99**h < 1e-4 <= 0.99 ** (h - 1)
    assert default_horizon([1, 10]) == 88


@pytest.mark.slow
def test_local_processes_and_ray_give_the_same_returns(points_file, tmp_path):
    ray = pytest.importorskip("ray")
    points = EvaluationPoints.load(points_file)
    points.states = points.states[:3]
    kwargs = dict(policy="random", rollouts=4, horizon=25, seed=7, taus=(1, 10, 100), chunk=2)
    here = monte_carlo_returns(points, workers=0, **kwargs)
    processes = monte_carlo_returns(points, workers=2, **kwargs)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = monte_carlo_returns(points, workers=2, use_ray=True, **kwargs)
    finally:
        ray.shutdown()
    for other in (processes, on_ray):
        assert np.array_equal(other.rollout_returns, here.rollout_returns)
        assert np.array_equal(other.rollout_lengths, here.rollout_lengths)
    # The rollouts of a point differ (sticky actions, random policy): the seeds are really per rollout.
    assert (here.rollout_returns[:, :, -1].std(axis=1) > 0).any()
    assert here.returns.shape == (3, 3) and np.allclose(here.returns, here.rollout_returns.mean(axis=1))
    here.save(tmp_path / "returns.npz")
    loaded = MonteCarloReturns.load(tmp_path / "returns.npz")
    assert np.array_equal(loaded.returns, here.returns) and loaded.config["horizon"] == 25


def test_a_network_policy_shipped_as_bytes_rolls_out_as_from_its_file(points_file, tmp_path):
    """Ray nodes may not see the driver's files: the network travels in the spec; results are the same."""
    points = EvaluationPoints.load(points_file)
    save_q_network(tmp_path / "net.pt", random_network(18, seed=1), game="centipede")
    spec = RolloutSpec(points.config["env"], str(tmp_path / "net.pt"), 0.3, 0, (0.0, 0.9), 20, seed=2)
    from_file = RolloutWorker(spec).run(2, points.states[2], [0, 1, 2])
    shipped = dataclasses.replace(spec, policy="elsewhere/net.pt", policy_bytes=(tmp_path / "net.pt").read_bytes())
    from_bytes = RolloutWorker(shipped).run(2, points.states[2], [0, 1, 2])
    assert np.array_equal(from_file[2], from_bytes[2]) and np.array_equal(from_file[3], from_bytes[3])
    assert from_file[2][:, 1].std() > 0  # ε = 0.3 and sticky actions: the three rollouts differ


def test_points_command_writes_points_and_returns(tmp_path, capsys):
    out = tmp_path / "pts"
    argv = ["atari", "points", "--episodes", "1", "--rollouts", "2", "--out", str(out), "--workers", "0"]
    argv += ["--max-episode-steps", "70", "--no-progress"]
    assert main([*argv, "--horizon", "20"]) == 0
    points = EvaluationPoints.load(out / "points.npz")
    returns = MonteCarloReturns.load(out / "returns.npz")
    summary = json.loads((out / "returns.json").read_text())
    assert returns.rollout_returns.shape == (len(points), 2, 9)
    assert summary["taus"] == [1, 2, 5, 10, 20, 40, 60, 80, 100]
    assert np.allclose(summary["returns"], returns.returns)
    assert returns.config["points_sha256"] and (returns.rollout_lengths <= 20).all()
    assert main([*argv, "--horizon", "soon"]) == 2
    assert "--horizon must be" in capsys.readouterr().err
    assert main([*argv, "--horizon", "20", "--seed", "3"]) == 1  # the points there were made with seed 0
    assert "other settings" in capsys.readouterr().err
