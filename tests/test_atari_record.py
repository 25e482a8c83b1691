"""`gamma-net atari record`: real ALE transitions, read back identically; interrupted and resumed = at once."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

from gamma_net_core.atari.env import AtariConfig, AtariEnv
from gamma_net_core.atari.networks import random_network, save_q_network
from gamma_net_core.atari.policies import RandomPolicy
from gamma_net_core.atari.record import record
from gamma_net_core.cli import main
from gamma_net_core.data.shards import read_transitions

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Short episodes, so that a tiny recording crosses episode cuts and shard boundaries.
CONFIG = AtariConfig(max_episode_steps=40)


def same(a, b) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in a._fields)


def test_recorded_transitions_are_the_episodes_as_played(tmp_path):
    record(tmp_path, steps=100, config=CONFIG, seed=3, shard_size=32, progress=False)
    data = read_transitions(tmp_path, feature_size=512)
    # The same play written out plainly: S_t's features, the reward of leaving it, how the step ended.
    env_seed, policy_seed = (int(s) for s in np.random.SeedSequence(3).generate_state(2))
    env, policy, rng = AtariEnv(CONFIG, seed=env_seed), RandomPolicy(18), np.random.default_rng(policy_seed)
    features, cumulants, terminals, truncated, episodes, steps = [], [], [], [], [], []
    episode, observation = 0, env.reset()
    for _ in range(100):
        features.append(policy.features(observation))
        step = env.step(policy.act(observation, rng))
        cumulants.append(step.reward)
        terminals.append(step.terminal)
        truncated.append(step.truncated)
        episodes.append(episode)
        steps.append(env.episode_step - 1)
        observation = step.observation
        if step.terminal or step.truncated:
            episode, observation = episode + 1, env.reset()
    assert np.array_equal(data.features, np.array(features))
    assert data.cumulants.tolist() == cumulants and sum(cumulants) > 0
    # Both rewards: the game's score and Dopamine's clipped one the agents learn from.
    assert data.clipped_cumulants.tolist() == np.clip(cumulants, -1, 1).tolist() and max(cumulants) > 1
    assert data.terminals.tolist() == terminals
    assert data.truncated.tolist() == truncated and sum(truncated) == 2  # cut at 40 and 80
    assert data.episodes.tolist() == episodes and data.steps.tolist() == steps


def test_extending_a_recording_equals_recording_at_once(tmp_path):
    record(tmp_path / "once", steps=110, config=CONFIG, seed=1, shard_size=25, progress=False)
    record(tmp_path / "twice", steps=37, config=CONFIG, seed=1, shard_size=25, progress=False)
    summary = record(tmp_path / "twice", steps=110, config=CONFIG, seed=1, shard_size=25, progress=False)
    assert summary["recorded"] == 73 and summary["total"] == 110
    assert same(read_transitions(tmp_path / "once"), read_transitions(tmp_path / "twice"))
    assert record(tmp_path / "twice", steps=50, config=CONFIG, seed=1, shard_size=25, progress=False)["recorded"] == 0


def test_a_crash_loses_only_uncommitted_rows_and_resuming_equals_recording_at_once(tmp_path):
    record(tmp_path / "once", steps=90, config=CONFIG, seed=2, shard_size=25, progress=False)

    def crash(count):
        if count == 63:  # between commits (at 50 and 75)
            raise RuntimeError("power cut")

    with pytest.raises(RuntimeError, match="power cut"):
        record(tmp_path / "crashed", steps=90, config=CONFIG, seed=2, shard_size=25, progress=False, on_step=crash)
    assert len(read_transitions(tmp_path / "crashed")) == 50
    record(tmp_path / "crashed", steps=90, config=CONFIG, seed=2, shard_size=25, progress=False)
    assert same(read_transitions(tmp_path / "once"), read_transitions(tmp_path / "crashed"))


def test_ctrl_c_commits_at_a_step_boundary_and_resuming_equals_recording_at_once(tmp_path):
    net = random_network(18, seed=4)
    save_q_network(tmp_path / "net.pt", net, game="centipede")
    kwargs = dict(config=CONFIG, seed=5, shard_size=25, progress=False, policy=str(tmp_path / "net.pt"), epsilon=0.2)
    record(tmp_path / "once", steps=70, **kwargs)

    def interrupt(count):
        if count == 33:
            os.kill(os.getpid(), signal.SIGINT)

    summary = record(tmp_path / "stopped", steps=70, on_step=interrupt, **kwargs)
    assert summary["interrupted"] and summary["total"] == 33
    assert len(read_transitions(tmp_path / "stopped")) == 33  # committed, though not a full shard
    record(tmp_path / "stopped", steps=70, **kwargs)
    assert same(read_transitions(tmp_path / "once"), read_transitions(tmp_path / "stopped"))


def test_record_command_and_resuming_with_other_settings(tmp_path, capsys):
    out = tmp_path / "rec"
    argv = ["atari", "record", "--steps", "30", "--out", str(out), "--max-episode-steps", "20", "--no-progress"]
    assert main([*argv, "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["data"]["total"] == 30 and report["data"]["game"] == "centipede"
    assert main([*argv[:3], "40", *argv[4:], "--seed", "9"]) == 1
    assert "seed: file has 0, expected 9" in capsys.readouterr().err
    assert len(read_transitions(out)) == 30  # nothing changed
    assert main(["atari", "record", "--game", "centipedx", "--steps", "5", "--out", str(tmp_path / "x")]) == 2
    assert "close matches: centipede" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["last shard truncated", "first shard gone"])
def test_continuing_a_minatar_recording_with_a_broken_shard_is_refused_in_one_line(tmp_path, damage):
    """`gamma-net atari record` as a user runs it: refused, exit 1, one line naming the shard; nothing written."""
    import shutil
    import subprocess
    import sys

    from waiting import bound

    gamma_net = shutil.which("gamma-net") or os.path.join(os.path.dirname(sys.executable), "gamma-net")
    out = tmp_path / "rec"
    argv = [gamma_net, "atari", "record", "--game", "minatar-breakout", "--shard-size", "20", "--out", str(out)]
    argv += ["--no-progress"]
    first = subprocess.run([*argv, "--steps", "60"], capture_output=True, text=True, timeout=bound(120))
    assert first.returncode == 0, first.stderr
    shard = out / ("shard-000002-n000020.npz" if damage == "last shard truncated" else "shard-000000-n000020.npz")
    if damage == "last shard truncated":
        shard.write_bytes(shard.read_bytes()[:-100])
    else:
        shard.unlink()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = subprocess.run([*argv, "--steps", "100"], capture_output=True, text=True, timeout=bound(120))
    lines = again.stderr.strip().splitlines()
    assert again.returncode == 1, again.stdout + again.stderr
    assert "Traceback" not in again.stderr and len(lines) == 1, again.stderr
    assert f"cannot continue this recording: transition shard {shard}" in lines[0], lines[0]
    assert ("is missing" if damage == "first shard gone" else "is corrupt") in lines[0], lines[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the index still lists what it did
