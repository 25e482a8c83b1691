"""MinAtar through the Atari pipeline's own commands: the DQN, recording, points, rollouts, Γ-nets, evaluation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gamma_net_core.atari.dqn import DQNConfig, DQNTrainer
from gamma_net_core.atari.evaluation_points import EvaluationPoints
from gamma_net_core.atari.minatar import MinAtarConfig, MinAtarEnv
from gamma_net_core.atari.minatar_network import MinAtarQNetwork
from gamma_net_core.atari.rollouts import MonteCarloReturns
from gamma_net_core.cli import main
from gamma_net_core.data.shards import read_transitions
from gamma_net_core.neural.learner import NeuralConfig
from gamma_net_core.paths import config_file
from gamma_net_studies import atari_series as study

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_TAUS = [f"{t:g}" for t in study.study_taus(NeuralConfig().probe_taus)]
TINY = ["--set", "hidden_sizes=[16, 8]", "--set", "min_replay_history=60", "--set", "target_sync_period=5"]


def small_config(**changes) -> DQNConfig:
    settings = dict(
        batch_size=8, replay_capacity=500, learning_starts=40, update_period=1, target_update_period=20,
        epsilon_decay_steps=100, epsilon_end=0.1, learning_rate=2.5e-4, reward_clip=1e6,
    )  # fmt: skip
    return DQNConfig(**{**settings, **changes})


@pytest.mark.slow
def test_resumed_minatar_training_makes_the_same_updates(tmp_path):
    """The checkpoint holds MinAtar's state (game fields, shared generator): a resumed run equals a straight one."""
    env = MinAtarConfig(game="minatar-breakout")
    straight = DQNTrainer(tmp_path / "a", config=small_config(), env_config=env, seed=3)
    assert isinstance(straight.online, MinAtarQNetwork)
    straight.train(150, progress=False)
    DQNTrainer(tmp_path / "b", config=small_config(), env_config=env, seed=3).train(77, progress=False)
    resumed = DQNTrainer(tmp_path / "b", config=small_config(), env_config=env, seed=3)
    assert resumed.steps == 77 and resumed.updates == 38
    resumed.train(150, progress=False)
    assert (straight.updates, straight.episodes) == (resumed.updates, resumed.episodes) == (111, straight.episodes)
    assert straight.episodes >= 3 and straight.episode_returns == resumed.episode_returns
    for mine, theirs in ((straight.online, resumed.online), (straight.target, resumed.target)):
        for name, tensor in mine.state_dict().items():
            assert torch.equal(tensor, theirs.state_dict()[name]), name
    assert straight.replay.frames.shape == (500, 4, 10, 10)  # whole observations, a stack of one
    assert np.array_equal(straight.replay.frames, resumed.replay.frames)


def greedy_score(network, game: str, *, episodes: int, seed: int) -> float:
    """Mean return of ``network``'s greedy actions (or uniform ones, for None) over ``episodes`` episodes."""
    env = MinAtarEnv(MinAtarConfig(game=game, max_episode_steps=500), seed=seed)
    rng = np.random.default_rng(seed)
    returns = []
    for _ in range(episodes):
        observation, total = env.reset(), 0.0
        while not env.episode_over:
            if network is None:
                action = int(rng.integers(env.num_actions))
            else:
                with torch.no_grad():
                    action = int(network(torch.from_numpy(observation)[None]).argmax())
            step = env.step(action)
            observation, total = step.observation, total + step.reward
        returns.append(total)
    return float(np.mean(returns))


#: A budget where learning shows on a fixed seed: 3,000 steps, 2,500 updates (see the test's docstring).
LEARN_GAME, LEARN_STEPS, LEARN_SEED = "minatar-breakout", 3000, 0
LEARN = dict(
    batch_size=32, replay_capacity=5000, learning_starts=500, target_update_period=250, epsilon_decay_steps=1500,
    learning_rate=1e-3,
)  # fmt: skip


@pytest.mark.slow
def test_the_dqn_learns_on_a_tiny_budget(tmp_path):
    """MinAtar's network and the pipeline's DQN, 3,000 steps of Breakout: its greedy play beats chance and its own
    untrained network on 30 episodes (Adam 1e-3, a test's budget, not config/minatar.yaml's 2.5e-4 for 5M frames).
    Measured on seeds 0 to 4: see docs/results.md, "MinAtar"."""
    trainer = DQNTrainer(
        tmp_path / "dqn", config=small_config(**LEARN), env_config=MinAtarConfig(game=LEARN_GAME), seed=LEARN_SEED
    )
    untrained = MinAtarQNetwork(6, in_channels=4)
    untrained.load_state_dict(trainer.online.state_dict())
    trainer.train(LEARN_STEPS, progress=False)
    chance = greedy_score(None, LEARN_GAME, episodes=30, seed=7)
    before = greedy_score(untrained.eval(), LEARN_GAME, episodes=30, seed=7)
    after = greedy_score(trainer.online.eval(), LEARN_GAME, episodes=30, seed=7)
    assert after > 2 * max(chance, before), (chance, before, after)


@pytest.mark.slow
def test_train_agent_takes_minatars_reference_settings_from_the_config(tmp_path):
    out = tmp_path / "agent"
    argv = ["atari", "train-agent", "--game", "minatar-freeway", "--frames", "60", "--out", str(out), "--no-progress"]
    assert main([*argv, "--learning-starts", "20", "--json", str(tmp_path / "t.json")]) == 0
    summary = json.loads((tmp_path / "t.json").read_text())["data"]
    assert summary["steps"] == summary["frames"] == 60 and summary["updates"] == 41  # one update a step from 20
    identity = json.loads((out / "log.json").read_text())["identity"]
    assert identity["dqn"]["target_update_period"] == 1000 and identity["dqn"]["epsilon_end"] == 0.1
    assert identity["dqn"]["learning_starts"] == 20  # the option over the file
    assert identity["env"] == {
        "game": "minatar-freeway", "sticky_action_probability": 0.1, "difficulty_ramping": True,
        "max_episode_steps": 27000,
    }  # fmt: skip


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """A tiny MinAtar study: agent, recording, evaluation points and rollouts."""
    root = tmp_path_factory.mktemp("minatar_study")
    # Freeway's episodes are cut at 150 steps: several points in each, the first episode's plotted in time.
    game = ["--game", "minatar-freeway", "--max-episode-steps", "150", "--no-progress"]
    agent = ["atari", "train-agent", "--frames", "200", "--learning-starts", "50", "--out", str(root / "agent")]
    assert main([*agent, *game]) == 0
    policy = ["--policy", str(root / "agent" / "network.pt")]
    assert main(["atari", "record", "--steps", "240", "--out", str(root / "rec"), *policy, *game]) == 0
    points = ["atari", "points", "--episodes", "2", "--rollouts", "3", "--horizon", "40", "--workers", "0"]
    assert main([*points, "--out", str(root / "pts"), "--taus", *ALL_TAUS, *policy, *game]) == 0
    return root


@pytest.mark.slow
def test_the_pipeline_records_points_and_rolls_out_minatar(pipeline):
    recording = read_transitions(pipeline / "rec")
    assert recording.features.shape == (240, 128) and np.isfinite(recording.features).all()
    points = EvaluationPoints.load(pipeline / "pts" / "points.npz")
    assert points.config["game"] == "minatar-freeway" and points.features.shape == (len(points), 128)
    assert points.steps.tolist().count(0) == 2 and len(points) >= 6  # each episode's start, then every 30 steps
    # A point restores exactly: its saved observation comes back in a fresh environment.
    env = MinAtarEnv(MinAtarConfig(game="minatar-freeway", max_episode_steps=150), seed=99)
    for state in points.states:
        np.testing.assert_array_equal(env.set_state(state), state.frames)
    returns = MonteCarloReturns.load(pipeline / "pts" / "returns.npz")
    assert returns.rollout_returns.shape == (len(points), 3, len(ALL_TAUS))
    assert np.isfinite(returns.returns).all() and (returns.rollout_lengths >= 1).all()


@pytest.mark.slow
def test_gamma_nets_train_and_evaluate_on_minatar(pipeline, tmp_path):
    run = tmp_path / "run"
    argv = ["atari", "train", "--shards", str(pipeline / "rec"), "--points", str(pipeline / "pts"), "--out", str(run),
            "--params", str(config_file("minatar")), "--series", "reference,probes", "--seeds", "1",
            "--eval-every", "60", "--workers", "0", "--no-progress", *TINY]  # fmt: skip
    assert main(argv) == 0
    saved = study.RunPredictions.load(run / "reference" / "seed-0" / study.PREDICTIONS)
    assert saved.transitions.tolist() == [0, 60, 120, 180, 240] and np.isfinite(saved.predictions).all()
    evaluation = tmp_path / "evaluation"
    argv = ["atari", "evaluate", "--run", str(run), "--points", str(pipeline / "pts"), "--out", str(evaluation)]
    assert main(argv) == 0
    result = json.loads((evaluation / "atari_evaluate.json").read_text())
    assert result["series"]["reference"]["seeds"] == [0]
    assert (evaluation / "fixed_vs_gamma_net_learning.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.slow
def test_rollouts_in_a_worker_process_equal_those_in_this_one(pipeline):
    """Points restored in a spawned worker (states and settings pickled, MinAtar imported afresh) replay exactly."""
    from gamma_net_core.atari.rollouts import monte_carlo_returns

    points = EvaluationPoints.load(pipeline / "pts" / "points.npz")
    policy = str(pipeline / "agent" / "network.pt")
    common = dict(policy=policy, rollouts=2, taus=[1.0, 10.0, 100.0], horizon=30, seed=5)
    here = monte_carlo_returns(points, workers=0, **common)
    there = monte_carlo_returns(points, workers=1, **common)
    np.testing.assert_array_equal(here.rollout_returns, there.rollout_returns)
    np.testing.assert_array_equal(here.rollout_lengths, there.rollout_lengths)
    # Freeway never ends early: each rollout reaches the horizon or the 150-step cut.
    assert set(np.unique(here.rollout_ends)) == {0, 2} and here.rollout_lengths.max() == 30
