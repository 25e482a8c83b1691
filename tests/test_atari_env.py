"""The ALE environment with the paper's settings, checked against the raw emulator (real ALE, Centipede)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gamma_net_core.atari.env import AtariConfig, AtariEnv, EnvState, resolve_game
from gamma_net_core.atari.preprocessing import area_weights, resize_area, resize_area_reference

UP = 2  # an action index of Centipede's minimal set whose effect shows in RAM on every frame


def raw_ale(game: str = "centipede"):
    """The emulator alone, without sticky actions: the oracle the environment is compared with."""
    from ale_py import ALEInterface, LoggerMode, roms

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(str(roms.get_rom_path(game)))
    return ale


def restore_raw(ale, state: EnvState) -> None:
    from ale_py import ALEState

    ale.restoreState(ALEState(state.ale_state))


def played(env: AtariEnv, steps: int, action: int = 0) -> EnvState:
    env.reset()
    for _ in range(steps):
        env.step(action)
    return env.get_state()


# -- preprocessing -----------------------------------------------------------------------------


def test_area_weights_by_hand():
    # 5 input pixels onto 2 output pixels: each output covers 2.5 inputs (weights in 1/2 pixel units).
    assert area_weights(5, 2).tolist() == [[2, 2, 1, 0, 0], [0, 0, 1, 2, 2]]
    assert area_weights(210, 84).sum(axis=1).tolist() == [210] * 84


def test_resize_by_hand_and_against_the_reference():
    frame = np.array([[0, 10, 20, 30, 40]] * 5, dtype=np.uint8)
    # Columns 0, 1 and half of 2 -> (0 + 10 + 10) / 2.5 = 8; the other side (10 + 30 + 40) / 2.5 = 32.
    assert resize_area(frame, 2).tolist() == [[8, 32], [8, 32]]
    rng = np.random.default_rng(0)
    screen = rng.integers(0, 256, size=(210, 160), dtype=np.uint8)
    assert np.array_equal(resize_area(screen, 84), resize_area_reference(screen, 84))
    flat = np.full((210, 160), 77, dtype=np.uint8)
    assert (resize_area(flat, 84) == 77).all()


# -- observations ------------------------------------------------------------------------------


def test_observation_shape_stacking_and_frame_skip():
    env = AtariEnv(AtariConfig(sticky_action_probability=0.0), seed=0)
    first = env.reset()
    assert first.shape == (4, 84, 84) and first.dtype == np.uint8
    assert not first[:3].any() and first[3].any()  # older slots zero at the episode start (Dopamine)
    previous = first
    for t in range(1, 6):
        frames_before = env.frame_number
        obs = env.step(UP).observation
        assert env.frame_number - frames_before == 4  # frame skip 4
        assert np.array_equal(obs[:3], previous[1:])  # oldest first, newest last
        assert env.episode_step == t
        previous = obs


def test_observation_is_the_max_of_the_last_two_frames_resized():
    env = AtariEnv(AtariConfig(sticky_action_probability=0.0), seed=0)
    state = played(env, 40)
    ale = raw_ale()
    restore_raw(ale, state)
    pooled_mattered = False
    for t in range(6):
        action = (UP, 1, 3, 4)[t % 4]
        screens = []
        for _ in range(4):
            ale.act(env.action_set[action])
            screens.append(ale.getScreenGrayscale().copy())
        expected = resize_area_reference(np.maximum(screens[2], screens[3]), 84)
        assert np.array_equal(env.step(action).observation[-1], expected)
        pooled_mattered |= not np.array_equal(expected, resize_area_reference(screens[3], 84))
    assert pooled_mattered  # Centipede flickers: the max over two frames is not the last frame


def test_rewards_are_the_sum_over_the_skipped_frames():
    env = AtariEnv(AtariConfig(sticky_action_probability=0.0), seed=0)
    state = played(env, 20)
    ale = raw_ale()
    restore_raw(ale, state)
    env_total = raw_total = 0.0
    for _ in range(150):
        env_total += env.step(1).reward  # FIRE scores points in Centipede
        raw_total += sum(ale.act(env.action_set[1]) for _ in range(4))
    assert env_total == raw_total > 0


# -- sticky actions ----------------------------------------------------------------------------


def sticky_frames_per_trial(p: float, trials: int) -> np.ndarray:
    """How many leading frames of one UP step repeated the previous NOOP, found from the emulator's RAM.

    From a state whose previous action is NOOP, a step of UP applies NOOP on its first k
    frames (each frame repeats the previous one with probability p) and UP on the rest. The
    RAM after the step is compared with the raw emulator's after k NOOPs then 4 - k UPs.
    """
    env = AtariEnv(AtariConfig(sticky_action_probability=p), seed=0)
    state = played(env, 50, action=0)
    ale = raw_ale()
    references = []
    for k in range(5):
        restore_raw(ale, state)
        for frame in range(4):
            ale.act(0 if frame < k else env.action_set[UP])
        references.append(ale.getRAM().tobytes())
    assert len(set(references)) == 5, "the five outcomes must be distinguishable for this test to mean anything"
    counts = []
    for trial in range(trials):
        env.set_state(state)
        env.reseed(trial)
        env.step(UP)
        ram = env.ram().tobytes()
        assert ram in references, "the step is not 'k repeated frames, then the new action'"
        counts.append(references.index(ram))
    return np.array(counts)


def test_sticky_actions_repeat_the_previous_action_at_the_right_rate():
    trials = 400
    k = sticky_frames_per_trial(0.25, trials)
    # P(first frame repeats) = p; P(first two repeat) = p^2. Bounds are 4 standard deviations.
    for frames, probability in ((1, 0.25), (2, 0.25**2)):
        rate = float(np.mean(k >= frames))
        sd = np.sqrt(probability * (1 - probability) / trials)
        assert abs(rate - probability) < 4 * sd, (frames, rate)
    assert (sticky_frames_per_trial(0.0, 50) == 0).all()


# -- episodes ----------------------------------------------------------------------------------


def test_a_lost_life_is_not_terminal():
    env = AtariEnv(AtariConfig(), seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    lives = env.lives
    for _ in range(3000):
        step = env.step(int(rng.integers(env.num_actions)))
        if env.lives < lives:
            assert not step.terminal and not step.truncated
            env.step(0)  # the episode goes on
            return
        assert not step.terminal
    pytest.fail("no life was lost in 3000 random steps")


def test_episode_is_truncated_at_the_step_cap():
    env = AtariEnv(AtariConfig(max_episode_steps=5), seed=0)
    env.reset()
    ends = [env.step(0) for _ in range(5)]
    assert [s.truncated for s in ends] == [False] * 4 + [True]
    assert not any(s.terminal for s in ends)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    assert env.episode_step == 0 and not env.step(0).truncated


def test_same_seed_same_episode_other_seed_other_sticky_actions():
    def run(seed):
        env = AtariEnv(AtariConfig(), seed=seed)
        env.reset()
        return np.stack([env.step(t % env.num_actions).observation[-1] for t in range(60)])

    assert np.array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


# -- saving and restoring ----------------------------------------------------------------------


def test_restored_state_replays_the_same_frames_and_rewards_in_another_environment():
    env = AtariEnv(AtariConfig(), seed=5)
    rng = np.random.default_rng(0)
    state = played(env, 40, action=1)
    actions = [int(a) for a in rng.integers(env.num_actions, size=80)]
    original = [env.step(a) for a in actions]
    assert sum(s.reward for s in original) > 0
    other = AtariEnv(AtariConfig(), seed=99)  # another emulator, another previous action and RNG
    played(other, 17, action=7)
    restored_state = EnvState.from_json(json.loads(json.dumps(state.to_json())))
    assert np.array_equal(other.set_state(restored_state), state.frames)
    assert other.episode_step == 40
    for a, expected in zip(actions, original):
        step = other.step(a)
        assert np.array_equal(step.observation, expected.observation)
        assert (step.reward, step.terminal, step.truncated) == (expected.reward, expected.terminal, expected.truncated)


def test_state_of_another_game_is_refused_and_changes_nothing():
    env = AtariEnv(AtariConfig(game="pong"), seed=0)
    before = played(env, 3)
    state = played(AtariEnv(AtariConfig(), seed=0), 3)
    with pytest.raises(ValueError, match="centipede"):
        env.set_state(state)
    assert env.get_state().ale_state == before.ale_state


# -- bad input ---------------------------------------------------------------------------------


def test_unknown_game_names_close_matches():
    with pytest.raises(ValueError, match=r"unknown Atari game 'centipedx'.*centipede"):
        AtariEnv(AtariConfig(game="centipedx"), seed=0)
    assert resolve_game("ChopperCommand") == "chopper_command"
    assert resolve_game("Centipede") == "centipede"


def test_bad_action_and_settings_are_refused():
    env = AtariEnv(AtariConfig(), seed=0)
    env.reset()
    with pytest.raises(ValueError, match="got 18"):
        env.step(18)
    with pytest.raises(ValueError, match="sticky_action_probability"):
        AtariConfig(sticky_action_probability=1.5)
    with pytest.raises(ValueError, match="frame_skip"):
        AtariConfig(frame_skip=0)
