"""`gamma-net horde train` on a recording with an off-policy question: it learns the target's values, not the
behaviour's, from the commands recorded beside the joint states."""

from __future__ import annotations

import json
import pathlib
import subprocess

import numpy as np
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from waiting import bound

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.sampling import read_signals

JS = {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState"}
CMD = {"topic": "/joint_commands", "type": "sensor_msgs/msg/JointState"}
SPEED = 0.6
P_UP = 1.0 / 3.0
#: Reading the bag, a Horde of two questions and one baseline learner per tau over 6,000 ticks (scaled by `bound`).
TRAIN_S = 120.0


def write_bag(path: pathlib.Path, *, seconds: float = 300.0, seed: int = 0) -> pathlib.Path:
    """Commands and joint states at 100 Hz: every 50 ms the behaviour commands the shoulder up (+0.6 rad/s) with
    probability 1/3, else down; the joint states report the command of 50 ms before (one tick of the Horde's 20 Hz
    clock) and an elbow swinging on its own. Decisions fall between the clock's ticks, so the cumulant of a tick is
    the action read at the tick before. A fresh choice every tick: TDC goes wrong where the behaviour holds its
    action over many ticks (docs/off-policy.md, "When off-policy learning is slow")."""
    rng = np.random.default_rng(seed)
    store = get_typestore(Stores.ROS2_HUMBLE)
    T = store.types
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    states = writer.add_connection(JS["topic"], JS["type"], typestore=store)
    commands = writer.add_connection(CMD["topic"], CMD["type"], typestore=store)
    choices = np.where(rng.random(int(seconds / 0.05) + 2) < P_UP, SPEED, -SPEED)

    def command(t: float) -> float:
        return float(choices[max(int(np.floor((t - 0.025) / 0.05)) + 1, 0)])

    start = 1_000_000_000
    for n in range(int(seconds * 100)):
        t = n / 100
        ns = start + round(t * 1e9)
        header = T["std_msgs/msg/Header"](
            stamp=T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""
        )
        state = T[JS["type"]](
            header=header,
            name=["shoulder", "elbow"],
            position=np.array([0.0, 1.5 + np.sin(2 * np.pi * t / 7.0)]),
            velocity=np.array([command(t - 0.05), 0.0]),
            effort=np.zeros(2),
        )
        writer.write(states, ns, store.serialize_cdr(state, JS["type"]))
        sent = T[CMD["type"]](
            header=header, name=["shoulder"], position=np.zeros(0), velocity=np.array([command(t)]), effort=np.zeros(0)
        )
        writer.write(commands, ns, store.serialize_cdr(sent, CMD["type"]))
    writer.close()
    return path


def questions(tmp_path: pathlib.Path) -> pathlib.Path:
    velocity = {**JS, "field": "velocity[shoulder]"}
    doc = {
        "rate_hz": 20.0,
        "stale_after_s": 0.5,
        "publish_taus": [1, 5, 20],
        "state": [{**JS, "field": "position[elbow]", "low": 0.4, "high": 2.6}],
        "learner": {"tilings": [8], "memory_size": 1024, "step_size": 0.1},
        "timescales": {"n_gamma": 1, "n_tau": 3, "tau_max": 20},
        "questions": [
            {
                "name": "shoulder_velocity_if_up",
                "cumulant": velocity,
                "policy": {
                    "action": {**CMD, "field": "velocity[shoulder]"},
                    "target": {"kind": "sign", "sign": "positive"},
                    "behaviour": {"kind": "matching"},
                },
            },
            {"name": "shoulder_velocity", "cumulant": velocity},
        ],
    }
    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_horde_train_learns_an_off_policy_question_from_the_recorded_commands(tmp_path):
    bag = write_bag(tmp_path / "bag")
    path = questions(tmp_path)
    signals = read_signals(bag, load_questions(path))
    # The action read at a tick is what the next tick's cumulant reports: rho of A_t weighs t -> t + 1.
    assert np.array_equal(signals.policy[:-1, 0, 0], signals.cumulants[1:, 0])
    assert np.all(np.isnan(signals.policy[:, :, 1]))  # the on-policy question reads no action

    out = tmp_path / "out"
    result = subprocess.run(
        ["gamma-net", "horde", "train", "--bag", str(bag), "--questions", str(path), "--out", str(out),
         "--no-progress"],
        capture_output=True, text=True, timeout=bound(TRAIN_S),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    horde = HordeLearner.load(out / "horde.npz")
    states = np.linspace(0.6, 2.4, 25)[:, None]
    f = np.stack([horde.predict(s, taus=[5.0])[:, 0] / 5.0 for s in states])  # (1 - gamma) V at tau 5: [25, Q]
    # Moving up, the shoulder's velocity is +0.6 every step; the behaviour moves it up a third of the time: -0.2.
    # Learned as the behaviour's, the off-policy question would answer -0.2 too.
    assert abs(np.median(f[:, 0]) - SPEED) < 0.1 and np.all(f[:, 0] > 0.4), f[:, 0]
    assert abs(np.median(f[:, 1]) - (P_UP * SPEED - (1 - P_UP) * SPEED)) < 0.1 and np.all(f[:, 1] < 0.0), f[:, 1]
    # The counted behaviour matched the target about a third of the ticks.
    b = horde.ratios.behaviour_estimates()
    assert abs(b[0, 1] - P_UP) < 0.1, b  # bins: no, yes
    data = json.loads((out / "horde_train.json").read_text())
    rows = data["questions"]["shoulder_velocity_if_up"]["timescales"]
    assert all(r["baseline_final"] is None and r["gamma_net_final"] > 0 for r in rows)  # no on-policy baseline


def test_horde_thresholds_learns_an_off_policy_question_too(tmp_path):
    """`horde thresholds` learns its pass as `horde train` does: with each off-policy question's rho."""
    bag = write_bag(tmp_path / "bag", seconds=120.0)
    out = tmp_path / "out"
    result = subprocess.run(
        ["gamma-net", "horde", "thresholds", "--bag", str(bag), "--questions", str(questions(tmp_path)),
         "--question", "shoulder_velocity_if_up", "--tau", "5", "--event", "shoulder_velocity above 0.5",
         "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=bound(TRAIN_S),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    horde = HordeLearner.load(next(out.glob("*.npz")))
    f = np.stack([horde.predict(s, taus=[5.0])[:, 0] / 5.0 for s in np.linspace(0.6, 2.4, 25)[:, None]])
    assert np.median(f[:, 0]) > 0.4 and np.median(f[:, 1]) < 0.0, f  # the target's values, and the behaviour's
