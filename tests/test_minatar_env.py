"""MinAtar as a domain of the Atari pipeline: the environment, its exact state, names, network files."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from waiting import bound

from gamma_net_core.atari import MINATAR_FEATURE_SIZE, MINATAR_GAMES
from gamma_net_core.atari.domains import config_from_mapping, env_config, make_env, resolve_game
from gamma_net_core.atari.env import AtariConfig, EnvState
from gamma_net_core.atari.minatar import MinAtarConfig, MinAtarEnv
from gamma_net_core.config import to_mapping


def play(env, actions):
    """(observation bytes, reward, terminal) of each step until the actions or the episode end."""
    steps = []
    for action in actions:
        step = env.step(int(action))
        steps.append((step.observation.tobytes(), step.reward, step.terminal))
        if step.terminal or step.truncated:
            break
    return steps


def a_state_with_rewards_ahead(game: str, seed: int):
    """An environment part-way into an episode whose next steps, under ``actions``, score (so they test something)."""
    rng = np.random.default_rng(seed)
    env = MinAtarEnv(MinAtarConfig(game=game), seed=seed)
    env.reset()
    for _ in range(200):
        warm = rng.integers(env.num_actions, size=int(rng.integers(5, 40)))
        if play(env, warm)[-1][2] or env.episode_over:
            env.reset()
            continue
        state = env.get_state()
        actions = rng.integers(env.num_actions, size=400)
        ahead = play(env, actions)
        if sum(reward for _, reward, _ in ahead) > 0:
            return env, state, actions, ahead
        env.set_state(state)  # nothing scored from here: walk on
        play(env, warm)
        if env.episode_over:
            env.reset()
    raise AssertionError(f"no scoring stretch found in {game}")


@pytest.mark.parametrize("game", MINATAR_GAMES)
def test_a_restored_episode_replays_identically(game):
    env, state, actions, ahead = a_state_with_rewards_ahead(game, seed=MINATAR_GAMES.index(game))
    # Through JSON (how recordings, points and checkpoints store it), into another environment with another seed.
    stored = EnvState.from_json(json.loads(json.dumps(state.to_json())))
    other = MinAtarEnv(MinAtarConfig(game=game), seed=12345)
    np.testing.assert_array_equal(other.set_state(stored), state.frames)
    assert other.episode_step == state.episode_step and not other.episode_over
    assert play(other, actions) == ahead
    # The saved state does not share the game's arrays: the environment played on, then went back.
    env.set_state(state)
    assert play(env, actions) == ahead


def test_reseeding_draws_other_futures_and_the_same_seed_the_same_one():
    env = MinAtarEnv(MinAtarConfig(game="minatar-asterix"), seed=0)
    env.reset()
    play(env, [0] * 5)
    state = env.get_state()
    futures = []
    for seed in (7, 7, 8):
        env.set_state(state)
        env.reseed(seed)
        futures.append(play(env, [0] * 60))
    assert futures[0] == futures[1]
    assert futures[0] != futures[2]  # enemies appear from the game's generator, which the seed replaced


def test_a_foreign_or_broken_state_is_refused_and_nothing_changes():
    breakout = MinAtarEnv(MinAtarConfig(game="minatar-breakout"), seed=0)
    breakout.reset()
    before = breakout.get_state()
    freeway = MinAtarEnv(MinAtarConfig(game="minatar-freeway"), seed=0)
    freeway.reset()
    with pytest.raises(ValueError, match="state is of game 'minatar-freeway'; this environment plays"):
        breakout.set_state(freeway.get_state())
    renamed = EnvState(**{**vars(freeway.get_state()), "game": "minatar-breakout"})
    with pytest.raises(ValueError, match=r"game fields .* are not minatar-breakout's"):
        breakout.set_state(renamed)
    broken = EnvState(**{**vars(before), "ale_state": b"\xff not json"})
    with pytest.raises(ValueError, match="not a saved minatar-breakout state"):
        breakout.set_state(broken)
    after = breakout.get_state()
    assert after.ale_state == before.ale_state and after.sticky_rng == before.sticky_rng


def test_steps_follow_minatar_and_the_episode_cut():
    env = MinAtarEnv(MinAtarConfig(game="minatar-freeway", max_episode_steps=30), seed=0)
    assert env.num_actions == 6 and env.observation_shape == (7, 10, 10)
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)
    observation = env.reset()
    assert observation.dtype == np.uint8 and observation.shape == (7, 10, 10) and set(np.unique(observation)) <= {0, 1}
    with pytest.raises(ValueError, match=r"action must be an int in \[0, 6\)"):
        env.step(6)
    steps = [env.step(2) for _ in range(30)]  # 'u': the chicken crosses, Freeway's only reward
    assert steps[-1].truncated and not steps[-1].terminal and env.episode_over
    assert not any(s.truncated for s in steps[:-1])


def test_the_domain_is_chosen_by_the_games_name():
    assert resolve_game("MinAtar:Space_Invaders") == "minatar-space-invaders"
    assert resolve_game("minatar_breakout") == "minatar-breakout"
    with pytest.raises(ValueError, match="unknown MinAtar game 'minatar-pong'; MinAtar games: minatar-asterix"):
        resolve_game("minatar-pong")
    config = env_config("minatar-seaquest")
    assert isinstance(config, MinAtarConfig) and config.sticky_action_probability == 0.1  # MinAtar's, not 0.25
    assert env_config("centipede").sticky_action_probability == 0.25 and isinstance(env_config("pong"), AtariConfig)
    assert config_from_mapping(to_mapping(config)) == config
    assert isinstance(make_env(env_config("minatar-breakout", sticky=0.0), seed=0), MinAtarEnv)


def test_minatar_network_files_load_as_policies(tmp_path):
    import torch

    from gamma_net_core.atari.minatar_network import random_network
    from gamma_net_core.atari.networks import save_q_network
    from gamma_net_core.atari.policies import load_policy
    from gamma_net_core.checkpoint import CheckpointError

    network = random_network(6, in_channels=4, seed=3)
    path = tmp_path / "network.pt"
    save_q_network(path, network, game="minatar-breakout")
    policy = load_policy(str(path), num_actions=6, game="minatar-breakout", epsilon=0.0)
    assert policy.feature_size == MINATAR_FEATURE_SIZE == 128
    observation = MinAtarEnv(MinAtarConfig(game="minatar-breakout"), seed=0).reset()
    action, phi = policy.act_with_features(observation, np.random.default_rng(0))
    with torch.no_grad():
        q, expected_phi = network.q_and_features(torch.from_numpy(observation)[None])
    assert action == int(q[0].argmax()) and np.array_equal(phi, expected_phi[0].numpy())
    with pytest.raises(CheckpointError, match="made for 'minatar-breakout', not 'minatar-asterix'"):
        load_policy(str(path), num_actions=6, game="minatar-asterix")
    random = load_policy("random", num_actions=6, game="minatar-freeway")
    assert random.features(MinAtarEnv(MinAtarConfig(game="minatar-freeway"), seed=0).reset()).shape == (128,)


def gamma_net(*argv):
    """The `gamma-net` command as a user runs it (the venv's console script)."""
    command = shutil.which("gamma-net") or str(pathlib.Path(sys.executable).with_name("gamma-net"))
    return subprocess.run([command, *argv], capture_output=True, text=True, timeout=bound(120))


def test_minatar_games_appear_in_the_atari_help_and_a_typo_is_one_line():
    result = gamma_net("atari", "--help")
    assert result.returncode == 0, result.stderr
    for game in MINATAR_GAMES:
        assert game in result.stdout
    assert "atari record" in result.stdout and "bench linear" not in result.stdout
    record = gamma_net("atari", "record", "--help")
    assert record.returncode == 0 and "minatar-breakout" in record.stdout
    typo = gamma_net("atari", "record", "--game", "minatar-brakeout", "--steps", "5", "--out", "/tmp/never-made")
    assert typo.returncode == 2
    assert typo.stderr.strip() == (
        "gamma-net atari record: --game: unknown MinAtar game 'minatar-brakeout'; MinAtar games: "
        + ", ".join(MINATAR_GAMES)
    )


def test_commands_that_play_ale_only_refuse_a_minatar_game_in_one_line():
    result = gamma_net("bench", "atari", "--game", "minatar-breakout")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "gamma-net bench atari: --game minatar-breakout: bench atari times ALE; "
        "MinAtar's rates are measured in docs/results.md (MinAtar)"
    )
