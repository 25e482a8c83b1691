"""The DQN trainer and its frame-sharing replay: stacks by hand, learning from reward, exact resume, the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gamma_net_core.atari.dqn import DQNConfig, DQNTrainer, epsilon_at
from gamma_net_core.atari.env import AtariConfig
from gamma_net_core.atari.frame_replay import FrameReplay
from gamma_net_core.cli import main
from gamma_net_core.data.shards import read_transitions

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def filled_replay(capacity: int, ends: dict[int, str], count: int) -> FrameReplay:
    """Step t stores a 1x1 frame of value t + 1 and action t; ``ends`` maps a step to 'terminal' or 'cut'."""
    replay = FrameReplay(capacity, frame_shape=(1, 1), stack=4)
    for t in range(count):
        end = ends.get(t)
        replay.add(frame=np.full((1, 1), t + 1), action=t, reward=float(t), terminal=end == "terminal", ended=bool(end))
    return replay


def values(stacks: np.ndarray) -> list[list[int]]:
    return stacks[:, :, 0, 0].tolist()


def test_stacks_are_rebuilt_with_zeros_before_each_episode_start():
    replay = filled_replay(10, {4: "terminal"}, 8)  # episode 0: steps 0..4, episode 1 from slot 5
    assert values(replay.stack_at(np.array([1, 4, 6]))) == [[0, 0, 1, 2], [2, 3, 4, 5], [0, 0, 6, 7]]
    valid = replay._valid(np.arange(10))
    # 0..6 have a next state (slot 4 is terminal: its next state is not needed); 7 is the newest; 8, 9 unwritten.
    assert valid.tolist() == [True] * 7 + [False] * 3
    cut = filled_replay(10, {4: "cut"}, 8)
    assert not cut._valid(np.array([4]))[0]  # the state after a cut was never stored


def test_wrapped_buffer_refuses_slots_whose_history_was_overwritten():
    replay = filled_replay(10, {}, 13)  # slots hold steps 10, 11, 12, 3, 4, ..., 9; cursor at 3
    valid = replay._valid(np.arange(10))
    assert valid.tolist() == [True, True, False, False, False, False, True, True, True, True]
    assert values(replay.stack_at(np.array([1]))) == [[9, 10, 11, 12]]
    batch = replay.sample(64, np.random.default_rng(0))
    newest = batch.observations[:, -1, 0, 0].astype(int)
    assert (batch.next_observations[:, -1, 0, 0] == newest + 1).all()
    assert (batch.actions == newest - 1).all() and (batch.rewards == newest - 1).all()
    assert set(newest.tolist()) <= {7, 8, 9, 10, 11, 12}  # steps 6..11 (slots 6..9, 0, 1)


def test_replay_state_round_trip():
    replay = filled_replay(12, {3: "terminal"}, 9)
    other = FrameReplay(12, frame_shape=(1, 1))
    other.load_state_dict(replay.state_dict())
    a, b = replay.sample(16, np.random.default_rng(1)), other.sample(16, np.random.default_rng(1))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="shape"):
        FrameReplay(11, frame_shape=(1, 1)).load_state_dict(replay.state_dict())


def test_epsilon_schedule():
    config = DQNConfig(learning_starts=100, epsilon_decay_steps=200, epsilon_end=0.1)
    assert [epsilon_at(s, config) for s in (0, 99, 100, 200, 300, 10**6)] == pytest.approx([1, 1, 1, 0.55, 0.1, 0.1])


def small_config(**changes) -> DQNConfig:
    settings = dict(
        replay_capacity=400,
        learning_starts=60,
        update_period=1,
        batch_size=16,
        target_update_period=15,
        epsilon_decay_steps=10**6,
        checkpoint_period=10**6,
        learning_rate=5e-4,
    )
    return DQNConfig(**{**settings, **changes})


@pytest.mark.slow
def test_q_values_learn_the_reward(tmp_path):
    """Value propagates from reward: with rewards, mean max Q climbs; with rewards clipped to 0, it does not."""

    def mean_max_q(reward_clip: float, directory) -> tuple[float, float]:
        config = small_config(reward_clip=reward_clip, batch_size=8, target_update_period=10)
        trainer = DQNTrainer(directory, config=config, seed=0)
        trainer.train(59, progress=False)
        states = torch.from_numpy(trainer.replay.sample(128, np.random.default_rng(5)).observations)
        with torch.no_grad():
            before = float(trainer.online(states).max(dim=1).values.mean())
        trainer.train(120, progress=False)  # 61 updates, 6 target syncs
        with torch.no_grad():
            return before, float(trainer.online(states).max(dim=1).values.mean())

    before, after = mean_max_q(1.0, tmp_path / "reward")
    before_0, after_0 = mean_max_q(0.0, tmp_path / "none")
    assert abs(before) < 0.2 and before == before_0  # the same initial network
    # Without reward, only the max over actions' overestimation lifts Q a little.
    assert after > 0.8 and after > 5 * abs(after_0)


@pytest.mark.slow
def test_resumed_training_makes_the_same_updates(tmp_path):
    env = AtariConfig(max_episode_steps=30)  # several episodes and cuts within the run
    config = small_config(update_period=2, batch_size=8, learning_starts=40, target_update_period=20)
    straight = DQNTrainer(tmp_path / "a", config=config, env_config=env, seed=3)
    straight.train(110, progress=False)
    DQNTrainer(tmp_path / "b", config=config, env_config=env, seed=3).train(57, progress=False)
    resumed = DQNTrainer(tmp_path / "b", config=config, env_config=env, seed=3)
    assert resumed.steps == 57 and resumed.updates == 9
    resumed.train(110, progress=False)
    assert (straight.steps, straight.updates, straight.episodes) == (resumed.steps, resumed.updates, resumed.episodes)
    assert straight.episodes >= 3 and straight.episode_returns == resumed.episode_returns
    for mine, theirs in ((straight.online, resumed.online), (straight.target, resumed.target)):
        for name, tensor in mine.state_dict().items():
            assert torch.equal(tensor, theirs.state_dict()[name]), name
    assert np.array_equal(straight.replay.frames, resumed.replay.frames)
    with pytest.raises(ValueError, match="learning_rate"):
        DQNTrainer(tmp_path / "b", config=small_config(learning_rate=1e-3), env_config=env, seed=3)


def test_train_agent_command_makes_a_network_the_recorder_plays(tmp_path):
    out = tmp_path / "agent"
    argv = ["atari", "train-agent", "--game", "centipede", "--frames", "400", "--out", str(out), "--no-progress"]
    argv += ["--replay-capacity", "200", "--learning-starts", "50", "--batch-size", "8", "--target-update-period", "20"]
    assert main([*argv, "--json", str(tmp_path / "t.json")]) == 0
    summary = json.loads((tmp_path / "t.json").read_text())["data"]
    assert summary["steps"] == 100 and summary["updates"] == 13  # updates at steps 52, 56, ..., 100
    log = json.loads((out / "log.json").read_text())
    assert log["steps"] == 100
    rec = tmp_path / "rec"
    assert main(["atari", "record", "--steps", "20", "--out", str(rec), "--policy", str(out / "network.pt")]) == 0
    assert read_transitions(rec).features.shape == (20, 512)


def test_target_sync_is_counted_in_agent_steps(tmp_path):
    """target_update_period counts agent steps (Dopamine's unit), not updates: at update_period 2 a period of
    20 steps syncs at step 60 (after 11 updates), and the update at step 62 moves the network away again."""
    config = small_config(update_period=2, batch_size=8, learning_starts=40, target_update_period=20)
    trainer = DQNTrainer(tmp_path / "dqn", config=config, seed=1)

    def synced() -> bool:
        return all(torch.equal(a, b) for a, b in zip(trainer.online.parameters(), trainer.target.parameters()))

    trainer.train(59, progress=False)
    assert trainer.updates == 10 and not synced()
    trainer.train(60, progress=False)
    assert trainer.updates == 11 and synced()
    trainer.train(62, progress=False)
    assert trainer.updates == 12 and not synced()
