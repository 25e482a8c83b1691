"""The neural predictor node, as a real node: Transition in from the bridge, Prediction and PredictAt out."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest
from compilations import numba_compilations
from diagnostic_msgs.msg import DiagnosticArray
from gamma_net_msgs.msg import Prediction, Transition
from gamma_net_msgs.srv import PredictAt
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from waiting import bound, spin_for

from gamma_net_core.atari.env import AtariConfig
from gamma_net_core.atari.record import record
from gamma_net_core.checkpoint import CheckpointError
from gamma_net_core.config import load_config
from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner
from gamma_net_core.neural.online import updates_due
from gamma_net_ros.ale_bridge import AleBridge
from gamma_net_ros.conversions import seconds_to_stamp
from gamma_net_ros.neural_predictor.node import NeuralPredictor
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
ATARI = config_file("atari")
STEPS = 300
#: Real code paths at toy sizes: the paper's network is [512, 256, 128, 16] after 20,000 steps.
TINY = {
    "learner.hidden_sizes": [16, 8],
    "learner.batch_size": 8,
    "learner.replay_capacity": 1000,
    "learner.min_replay_history": 40,
    "learner.update_period": 2,
    "learner.target_sync_period": 20,
    "learner.step_size": 1e-3,
    "publish_rate": 50.0,
}
TAUS = [1.0, 10.0, 100.0]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    out = tmp_path_factory.mktemp("neural") / "centipede"
    record(out, steps=STEPS, config=AtariConfig(max_episode_steps=120), shard_size=100, progress=False)
    return out


class Rig(Node):
    def __init__(self) -> None:
        super().__init__("neural_rig")
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.transitions = self.create_publisher(Transition, "transitions", reliable)
        self.predictions: list[Prediction] = []
        self.diagnostics: dict[str, dict[str, str]] = {}
        self.create_subscription(Prediction, "predictions", self.predictions.append, 100)
        self.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.client = self.create_client(PredictAt, "predict_at")

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.diagnostics[status.name.split(":")[0]] = {kv.key: kv.value for kv in status.values}

    def call(self, executor, spin, timescales, scale) -> PredictAt.Response:
        assert self.client.wait_for_service(timeout_sec=bound(5))
        future = self.client.call_async(PredictAt.Request(timescales=list(timescales), scale=scale))
        assert spin(executor, future.done, timeout=10)
        return future.result()


def tiny_config() -> NeuralConfig:
    """The learner the node builds from config/atari.yaml with TINY on top."""
    changes = {k.split(".", 1)[1]: tuple(v) if isinstance(v, list) else v for k, v in TINY.items() if "." in k}
    return dataclasses.replace(load_config(NeuralConfig, ATARI, "neural_predictor", "learner"), **changes)


def predictor(**params) -> NeuralPredictor:
    overrides = [Parameter(k, value=v) for k, v in {**TINY, **params}.items()]
    return NeuralPredictor(cli_args=["--ros-args", "--params-file", str(ATARI)], parameter_overrides=overrides)


def transition(episode: int, step: int, *, features=None, cumulant: float = 0.0, terminal: bool = False) -> Transition:
    msg = Transition()
    msg.header.stamp = seconds_to_stamp(1000.0 + step)
    msg.features = np.full(512, 0.1, np.float32) if features is None else np.asarray(features, np.float32)
    msg.cumulant = cumulant
    msg.terminal = terminal
    msg.episode, msg.step = episode, step
    return msg


def _setup(executor, spin, **params):
    node, rig = predictor(**params), Rig()
    executor.add_node(node)
    executor.add_node(rig)
    assert spin(executor, lambda: rig.count_subscribers("transitions") >= 1, timeout=5)
    return node, rig


def test_learns_from_the_bridge_and_predict_at_matches_what_it_publishes(executor, spin, recording):
    node, rig = _setup(executor, spin, publish_timescales=TAUS)
    bridge = AleBridge(
        cli_args=["--ros-args", "--params-file", str(ATARI)],
        parameter_overrides=[Parameter("shard_dir", value=str(recording))],
    )
    executor.add_node(bridge)
    assert spin(executor, lambda: bridge.finished.done(), timeout=30)
    assert bridge.finished.result() == 0  # every message taken by the predictor
    stream = node.stream
    assert spin(executor, lambda: stream.owed_updates == 0, timeout=30)
    assert stream.received == STEPS and stream.skipped_total == 0 and stream.gaps == 0
    # The last step (mid-episode) is held back until the stream says whether it continues.
    assert stream.learner.transitions == STEPS - 1
    assert stream.learner.updates == updates_due(STEPS - 1, min_replay_history=40, update_period=2) == 130

    def published_final():
        last = rig.predictions[-1] if rig.predictions else None
        return (
            last is not None and last.update_count == 130 and last.header.stamp == seconds_to_stamp(stream.latest.stamp)
        )

    assert spin(executor, published_final, timeout=10)
    last = rig.predictions[-1]
    assert last.question == "reward"
    np.testing.assert_allclose(1 / (1 - np.asarray(last.gammas)), TAUS)
    answer = rig.call(executor, spin, TAUS, PredictAt.Request.SCALE_TAU)
    assert answer.success, answer.message
    np.testing.assert_allclose(answer.values, last.values, rtol=1e-12)
    assert answer.update_count == last.update_count and answer.header.stamp == last.header.stamp
    # Learning changed the predictions: the untrained network's answer at the same state differs.
    assert stream.config == tiny_config()
    untrained = NeuralLearner(tiny_config()).predict(stream.latest.features, last.gammas)[0]
    assert np.abs(np.asarray(last.values) - untrained).max() > 1e-3
    assert spin(executor, lambda: rig.diagnostics.get("neural_predictor", {}).get("updates") == "130", timeout=5)
    assert rig.diagnostics["neural_predictor"]["received"] == str(STEPS)


def test_bad_messages_are_skipped_counted_and_never_learned_from(executor, spin):
    node, rig = _setup(executor, spin)
    nan = np.full(512, 0.1, np.float32)
    nan[7] = math.nan
    for msg in [
        transition(0, 0),
        transition(0, 1, features=np.ones(100)),  # another network's φ
        transition(0, 1, features=nan),
        transition(0, 1, cumulant=math.inf),
        transition(0, 1, features=[]),
        transition(0, 1),
        transition(0, 2),
        transition(0, 5),  # steps 3 and 4 lost: step 2 must not lead to step 5
        transition(0, 6, terminal=True),
    ]:
        rig.transitions.publish(msg)
    stream = node.stream
    assert spin(executor, lambda: stream.taken == 9, timeout=10)
    assert stream.skipped == {"wrong_size": 2, "non_finite": 2}
    assert stream.gaps == 1
    replay = stream.learner.replay
    assert stream.learner.transitions == replay.added == 5  # steps 0, 1, 2 (cut), 5, 6
    assert replay.truncateds[:5].tolist() == [False, False, True, False, False]
    assert replay.terminals[:5].tolist() == [False, False, False, False, True]
    assert np.isfinite(replay.features[:5]).all() and np.isfinite(replay.cumulants[:5]).all()

    def reported(values):
        status = rig.diagnostics.get("neural_predictor", {})
        return all(status.get(k) == v for k, v in values.items())

    counts = {"skipped": "4", "skipped.wrong_size": "2", "skipped.non_finite": "2", "gaps": "1", "received": "9"}
    assert spin(executor, lambda: reported(counts), timeout=5)


def test_a_request_before_any_transition_is_refused(executor, spin):
    _, rig = _setup(executor, spin)
    answer = rig.call(executor, spin, [10.0], PredictAt.Request.SCALE_TAU)
    assert not answer.success and "no transition received yet" in answer.message


@pytest.mark.parametrize(
    "timescales, scale, needle",
    [
        ([0.5, 1.0], PredictAt.Request.SCALE_GAMMA, "gamma must be in [0, 1); got 1.0 at index 1"),
        ([0.5], PredictAt.Request.SCALE_TAU, "tau must be finite and >= 1; got 0.5"),
        ([math.nan], PredictAt.Request.SCALE_GAMMA, "got nan"),
        ([], PredictAt.Request.SCALE_TAU, "must not be empty"),
        ([10.0], 7, "scale must be SCALE_GAMMA (0) or SCALE_TAU (1); got 7"),
    ],
)
def test_bad_requests_get_a_clear_error(executor, spin, timescales, scale, needle):
    node, rig = _setup(executor, spin)
    rig.transitions.publish(transition(0, 0))
    assert spin(executor, lambda: node.stream.latest is not None, timeout=5)
    answer = rig.call(executor, spin, timescales, scale)
    assert not answer.success
    assert needle in answer.message
    assert list(answer.values) == []


def test_publish_timescales_are_validated_at_run_time(executor, spin):
    node, rig = _setup(executor, spin)
    result = node.set_parameters([Parameter("publish_timescales", value=[10.0, 0.5])])[0]
    assert not result.successful and "got 0.5" in result.reason
    result = node.set_parameters_atomically(
        [Parameter("publish_scale", value="gamma"), Parameter("publish_timescales", value=[0.9, 0.99])]
    )
    assert result.successful, result.reason
    rig.transitions.publish(transition(0, 0))
    assert spin(executor, lambda: bool(rig.predictions), timeout=5)
    np.testing.assert_allclose(rig.predictions[-1].gammas, [0.9, 0.99])


def test_checkpoint_survives_a_kill_and_resumes(executor, spin, tmp_path):
    checkpoint = tmp_path / "centipede.pt"
    params = {**TINY, "checkpoint_path": str(checkpoint), "checkpoint_interval": 0.3}
    command = node_command(
        "gamma_net_ros.neural_predictor.node", params_file=ATARI, params=params, node="neural_predictor"
    )
    rig = Rig()
    executor.add_node(rig)
    rng = np.random.default_rng(0)
    step = 0

    def feed_until(done, process, log, timeout):
        nonlocal step
        deadline = time.monotonic() + bound(timeout)
        while not done():
            assert time.monotonic() < deadline and process.running, log.read_text()
            for _ in range(10):
                rig.transitions.publish(transition(0, step, features=rng.random(512), cumulant=float(step % 7 == 0)))
                step += 1
            executor.spin_once(timeout_sec=0.01)

    first = NodeProcess(command, log_path=tmp_path / "first.log").start()
    try:
        assert spin(executor, lambda: rig.count_subscribers("transitions") >= 1, timeout=30)
        feed_until(lambda: step >= 300, first, tmp_path / "first.log", timeout=40)
        trained = lambda: int(rig.diagnostics.get("neural_predictor", {}).get("updates", 0)) > 0  # noqa: E731
        assert spin(executor, trained, timeout=10)
        since = time.time()
        assert spin(executor, lambda: checkpoint.exists() and checkpoint.stat().st_mtime > since, timeout=10)
        first.kill()  # SIGKILL while learning: no chance to save
    finally:
        first.stop(timeout=bound(10.0))
    spin_for(executor, 0.5)  # take in what it sent before it died
    config = tiny_config()
    saved = NeuralLearner.load(checkpoint, config=config)  # whole and valid
    assert 0 < saved.transitions <= step and saved.updates > 0

    rig.predictions.clear()
    rig.diagnostics.clear()
    restart = step  # the killed node's subscription lingers in discovery: tell its answers by their states
    second = NodeProcess(command, log_path=tmp_path / "second.log").start()
    try:
        up = lambda: second.log_path.exists() and "publishing tau" in second.log_path.read_text()  # noqa: E731
        assert spin(executor, up, timeout=30), second.log_path.read_text()
        answers = lambda: [p for p in rig.predictions if p.header.stamp.sec >= 1000 + restart]  # noqa: E731
        feed_until(lambda: bool(answers()), second, tmp_path / "second.log", timeout=30)
        # The counts on /diagnostics are this start's: what the checkpoint's stream took before is not in them.
        counts = lambda: {k: int(v) for k, v in rig.diagnostics.get("neural_predictor", {}).items() if v.isdigit()}  # noqa: E731
        parts = ("processed", "skipped", "queued")
        accounted = lambda c: all(k in c for k in parts) and c.get("received", 0) == sum(c[k] for k in parts) > 0  # noqa: E731
        assert spin(executor, lambda: accounted(counts()), timeout=bound(30.0)), counts()
        assert counts()["received"] <= step - restart, (counts(), step - restart)
    finally:
        assert second.stop(timeout=bound(10.0)) == 0
    assert answers()[0].update_count >= saved.updates
    assert "resumed from" in (tmp_path / "second.log").read_text()
    assert NeuralLearner.load(checkpoint, config=config).transitions > saved.transitions  # saved on shutdown

    # Another configuration: refused, with the setting named, the checkpoint untouched.
    before = checkpoint.read_bytes()
    with pytest.raises(CheckpointError, match=r"step_size: file has 0\.001, expected 0\.01"):
        predictor(checkpoint_path=str(checkpoint), **{"learner.step_size": 0.01})
    assert checkpoint.read_bytes() == before


def test_after_its_warm_up_the_node_compiles_nothing_when_it_trains(executor, spin):
    """warm_up compiles the replay's kernels: the training thread, which a Ctrl-C waits for, never compiles.

    Compiling there at the first update held the shutdown for as long as numba took (2.9 s on
    an empty cache at load 8 here; `ros2 launch` sends SIGTERM after 5 s).
    """
    node, rig = _setup(executor, spin)
    node.warm_up()
    with numba_compilations() as compiled:
        for step in range(60):  # past min_replay_history (40): updates every 2 steps
            rig.transitions.publish(transition(0, step, terminal=step == 59))
        assert spin(executor, lambda: node.stream.learner.updates > 0 and node.stream.owed_updates == 0, timeout=30)
        node.stop_worker()
    assert compiled == []
