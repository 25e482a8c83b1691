"""PredictAt's limits, on both predictor nodes: a cap per request, nothing beyond the trained timescales.

A Γ-net is trained on timescales up to its tau_max; asked beyond, it extrapolates without bound
(γ above the largest trained γ once answered 6.7e10). Such a request is refused, and the
message names the timescale on the scale the request used (a huge τ as τ, not as "gamma 1.0").
"""

from __future__ import annotations

import subprocess

import pytest
from gamma_net_msgs.srv import PredictAt
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from waiting import bound

from gamma_net_ros.neural_predictor.node import NeuralPredictor
from gamma_net_ros.predictor import Predictor
from gamma_net_ros.processes import node_command

pytestmark = pytest.mark.ros
TAU, GAMMA = PredictAt.Request.SCALE_TAU, PredictAt.Request.SCALE_GAMMA
#: The neural predictor's learner at toy sizes (its tau_max is the default, 100, as the predictor's).
TINY = {"learner.feature_size": 4, "learner.hidden_sizes": [8], "learner.replay_capacity": 100}


def _nodes(executor, spin, which: str):
    if which == "predictor":
        node = Predictor()
    else:
        node = NeuralPredictor(parameter_overrides=[Parameter(k, value=v) for k, v in TINY.items()])
    caller = Node("predict_at_caller")
    executor.add_node(node)
    executor.add_node(caller)
    client = caller.create_client(PredictAt, "predict_at")
    assert client.wait_for_service(timeout_sec=bound(20))

    def call(timescales, scale) -> PredictAt.Response:
        future = client.call_async(PredictAt.Request(timescales=[float(t) for t in timescales], scale=scale))
        assert spin(executor, future.done, timeout=20)
        return future.result()

    return node, call


@pytest.mark.parametrize("which", ["predictor", "neural_predictor"])
@pytest.mark.parametrize(
    "timescales, scale, named",
    [
        ([1.0, 101.0], TAU, ["tau 101 at index 1", "tau 100"]),
        ([1e20], TAU, ["tau 1e+20 at index 0", "tau 100"]),
        ([0.5, 0.995], GAMMA, ["gamma 0.995 at index 1", "gamma 0.99 (tau 100)"]),
        # The value named is the value sent, to the last digit (":g" once called it "gamma 1").
        ([0.999999999999], GAMMA, ["gamma 0.999999999999 at index 0"]),
        ([0.5], 7, ["scale", "7"]),
        ([0.5], TAU, ["tau", "0.5"]),
        ([1.0], GAMMA, ["gamma", "1.0"]),
    ],
    ids=["tau-beyond", "tau-huge", "gamma-beyond", "gamma-near-1", "bad-scale", "tau-below-1", "gamma-1"],
)
def test_refused_naming_the_timescale_on_its_scale(executor, spin, which, timescales, scale, named):
    _, call = _nodes(executor, spin, which)
    answer = call(timescales, scale)
    assert not answer.success
    for text in named:
        assert text in answer.message, answer.message
    assert list(answer.values) == [] and list(answer.gammas) == []
    if scale == TAU and timescales[-1] > 1e6:
        assert "gamma" not in answer.message


@pytest.mark.parametrize("which", ["predictor", "neural_predictor"])
def test_requests_are_capped_by_a_parameter(executor, spin, which):
    node, call = _nodes(executor, spin, which)
    answer = call([2.0] * 1001, TAU)
    assert not answer.success
    assert "1001 timescales requested; at most 1000" in answer.message and "max_request_timescales" in answer.message
    assert node.set_parameters([Parameter("max_request_timescales", value=2000)])[0].successful
    assert "requested" not in call([2.0] * 1001, TAU).message  # within the cap now
    assert not node.set_parameters([Parameter("max_request_timescales", value=0)])[0].successful  # range 1..1e6


def test_the_trained_bounds_themselves_are_answered(executor, spin):
    node, call = _nodes(executor, spin, "predictor")
    feeder = Node("predict_at_feeder")
    executor.add_node(feeder)
    states = feeder.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
    assert spin(executor, lambda: states.get_subscription_count() >= 1, timeout=20)
    reading = JointState(name=["shoulder", "elbow"], position=[0.1, 1.0], velocity=[0.5, 0.0])
    assert spin(executor, lambda: states.publish(reading) or node.online.latest is not None, timeout=20)
    for timescales, scale in (([1.0, 100.0], TAU), ([0.0, 0.99], GAMMA)):
        answer = call(timescales, scale)
        assert answer.success, answer.message
        assert len(answer.values) == 2


@pytest.mark.parametrize("which", ["predictor", "neural_predictor"])
def test_published_timescales_beyond_the_trained_ones_are_refused_at_run_time(executor, spin, which):
    node, call = _nodes(executor, spin, which)
    before = node.published.gammas.copy()
    for changes, named in (
        ({"publish_timescales": [10.0, 1000.0]}, "tau 1000.0 at index 1 is beyond"),
        ({"publish_scale": "gamma", "publish_timescales": [0.5, 0.995]}, "gamma 0.995 at index 1 is beyond"),
    ):
        result = node.set_parameters_atomically([Parameter(k, value=v) for k, v in changes.items()])
        assert not result.successful and named in result.reason, result.reason
        assert "tau_max" in result.reason
        assert (node.published.gammas == before).all()  # nothing changed
        assert not call([1000.0], TAU).success  # predict_at refuses the same timescale
    assert node.set_parameters([Parameter("publish_timescales", value=[1.0, 100.0])])[0].successful  # tau_max itself


@pytest.mark.parametrize("which", ["predictor", "neural_predictor"])
def test_published_timescales_beyond_the_trained_ones_are_refused_at_start(tmp_path, which):
    params = {"publish_timescales": [1.0, 1000.0]}
    if which == "neural_predictor":
        params.update(TINY)
    command = node_command(f"gamma_net_ros.{which}", params=params)
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(120), cwd=tmp_path)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    fatal = [line for line in out.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and "publish_timescales refused: tau 1000.0 at index 1 is beyond" in fatal[0], out
    assert "Traceback" not in out
