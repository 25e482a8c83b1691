"""`make demo`'s Horde: many questions about the emulated arm, learned live, with their online error.

Beside the predictor, the demo runs the ``horde`` node on config/horde.yaml's questions (the speed
of both joints, the shoulder's effort, an event question), started once the driver's first
JointState shows which fields the arm publishes (the driver's effort is its servos' Present
Current times a torque constant): a question on a field a driver does not publish is left out,
with a line saying so. Every two seconds
a line shows each question's prediction and its running error against the realized return; at
the end a table gives the error of every question at every published timescale beside the error
of predicting the running mean.
"""

from __future__ import annotations

import math
import pathlib
import shutil
import tempfile

import numpy as np
import yaml

from gamma_net_core.report import Table
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

#: The timescale (tau, in the horde's ticks) shown in the live lines.
SHOWN_TAU = 10.0


def _field_published(field: str, joint_state) -> bool:
    """Whether a JointState field path (``effort[shoulder]``) has data in this message."""
    name = field.split("[")[0].split(".")[0]
    values = getattr(joint_state, name, None)
    return values is None or len(values) > 0


class HordeDemo:
    """Starts the horde node on the first JointState and records what it publishes.

    Args:
      node: the demo's recording node (its subscriptions are spun with it).
      logs: folder for the node's log.
    """

    def __init__(self, node, logs: pathlib.Path) -> None:
        from gamma_net_msgs.msg import PredictionArray, PredictionErrors
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        self.logs = logs
        self.process: NodeProcess | None = None
        self.folder: pathlib.Path | None = None  # the questions the node was started with
        self.latest = None
        self.errors = None
        self.dropped: list[str] = []
        node.create_subscription(JointState, "joint_states", self._on_joint_state, qos_profile_sensor_data)
        node.create_subscription(PredictionArray, "horde/predictions", self._on_predictions, 10)
        node.create_subscription(PredictionErrors, "horde/errors", self._on_errors, 10)

    def _on_joint_state(self, msg) -> None:
        if self.process is not None:
            return
        doc = yaml.safe_load(config_file("horde").read_text())
        kept = []
        for question in doc["questions"]:
            signals = [question["cumulant"], *([question["termination"]] if question.get("termination") else [])]
            joint_signals = [s for s in signals if s["type"].endswith("JointState")]
            if all(_field_published(s["field"], msg) for s in joint_signals):
                kept.append(question)
            else:
                self.dropped.append(question["name"])
        doc["questions"] = kept
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="gamma-net-demo-horde-"))
        questions = self.folder / "questions.yaml"
        questions.write_text(yaml.safe_dump(doc, sort_keys=False))
        if self.dropped:
            print(f"[demo] horde: the driver publishes no data for {self.dropped}: left out", flush=True)
        command = node_command("gamma_net_ros.horde.node", params={"questions_file": str(questions.resolve())})
        self.process = NodeProcess(command, log_path=self.logs / "horde.log").start()
        print(f"[demo] horde: {len(kept)} questions {[q['name'] for q in kept]} (log {self.logs / 'horde.log'})")

    def _on_predictions(self, msg) -> None:
        self.latest = msg

    def _on_errors(self, msg) -> None:
        self.errors = msg

    def check(self) -> None:
        """RuntimeError with the log's end if the node exited."""
        if self.process is not None and not self.process.running:
            raise RuntimeError(f"the horde node exited during the demo\n{self.process.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def line(self, elapsed: float) -> str:
        """Each question's (1-γ)·prediction at tau SHOWN_TAU and its running rmse / the mean predictor's."""
        msg = self.latest
        if msg is None:
            return f"[demo] t={elapsed:5.1f} s  horde: waiting for predictions"
        taus = 1.0 / (1.0 - np.asarray(msg.gammas))
        k = int(np.argmin(np.abs(taus - SHOWN_TAU)))
        gamma = msg.gammas[k]
        values = np.reshape(msg.values, (len(msg.questions), len(msg.gammas)))
        parts = []
        for q, name in enumerate(msg.questions):
            part = f"{name} {values[q, k] * (1 - gamma):.3f}"
            rmse, mean_rmse = self._error(q, k)
            if math.isfinite(rmse):
                part += f" (rmse {rmse:.3f} vs mean {mean_rmse:.3f})"
            parts.append(part)
        return f"[demo] t={elapsed:5.1f} s  horde τ={taus[k]:g}, (1-γ)·prediction: " + "; ".join(parts)

    def _error(self, q: int, k: int) -> tuple[float, float]:
        e = self.errors
        if e is None:
            return math.nan, math.nan
        i = q * (len(e.gammas) + len(e.readouts)) + k
        if e.samples[i] == 0:
            return math.nan, math.nan
        return e.rmse[i] * (1 - e.gammas[k]), e.mean_rmse[i] * (1 - e.gammas[k])

    def table(self) -> Table:
        """The online error of every question at every published timescale and readout, at the end."""
        table = Table(
            "horde node: online error against the realized return, per question and timescale",
            ["question", "timescale", "returns scored", "rmse", "mean-predictor rmse", "rmse / mean-predictor"],
        )
        e = self.errors
        if e is None:
            return table
        columns = [f"tau {1.0 / (1.0 - g):g}" for g in e.gammas] + list(e.readouts)
        for q, name in enumerate(e.questions):
            for k, column in enumerate(columns):
                i = q * len(columns) + k
                ratio = e.rmse[i] / e.mean_rmse[i] if e.samples[i] and e.mean_rmse[i] > 0 else math.nan
                table.add(name, column, int(e.samples[i]), float(e.rmse[i]), float(e.mean_rmse[i]), float(ratio))
        return table
