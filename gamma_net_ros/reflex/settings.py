"""The reflex's parameters, declared together at construction, and the rules they load.

Every parameter is fixed once the node is up: the rules and their inputs are read once, and a
safety filter whose rules changed under it would be another filter.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node

from gamma_net_core.horde.questions import HordeSpec, load_questions
from gamma_net_core.reflex.rules import PredictorSpec, RuleSet, first_duplicate, load_rules
from gamma_net_ros.graph_watch import GraphWatch
from gamma_net_ros.horde.topics import check_field, message_class
from gamma_net_ros.params import declare
from gamma_net_ros.paths import config_file
from gamma_net_ros.reflex.forms import COMMAND_FORMS, INTERFACES, make_form


@dataclass(frozen=True)
class ReflexSettings:
    """What the node reads once (``''`` paths: the files in config/)."""

    rules_path: str
    questions_path: str
    predictor_path: str
    command_type: str
    interface: str
    joint_names: list
    decide_rate_hz: float
    command_stale_s: float
    hold_period_s: float
    state_stale_s: float
    diagnostics_period_s: float


def declare_settings(node: Node) -> ReflexSettings:
    """Declare the reflex's parameters on ``node``, all read-only."""
    p = lambda *a, **k: declare(node, *a, read_only=True, **k)  # noqa: E731
    rules_path = p("rules_file", "", "the rules YAML ('' = config/reflex_rules.yaml)")
    questions_path = p("questions_file", "", "the Horde's questions YAML ('' = config/reflex_questions.yaml)")
    predictor_path = p("predictor_file", "", "the predictor's parameters, for from: predictor rules ('' = arm.yaml)")
    kind = p("command_type", "joint_state", "the command message", constraints=f"one of {COMMAND_FORMS.names()}")
    interface = p("interface", "velocity", "float64_multi_array's interface", constraints=f"one of {INTERFACES}")
    names = p("joint_names", ["shoulder", "elbow"], "the commanded joints (float64_multi_array: in data order)")
    if isinstance(names, list) and (twice := first_duplicate(names)) is not None:  # make_form refuses a non-list
        raise ValueError(f"parameter joint_names names {twice!r} twice; got {list(names)}")
    rate = p("decide_rate_hz", 100.0, "rules re-checked this often without input, 1/s", low=1.0, high=1000.0)
    command_stale_s = p("command_stale_s", 0.5, "a switch re-sends a velocity if this recent, s", low=0.0, high=60.0)
    hold_period_s = p("hold_period_s", 0.1, "a fail-safe stop re-sends its hold this often, s", low=0.01, high=10.0)
    state_stale_s = p("state_stale_s", 0.5, "joint_states older than this: position unknown, s", low=0.01, high=60.0)
    period = p("diagnostics_period_s", 1.0, "period of /diagnostics, s", low=0.1, high=60.0)
    return ReflexSettings(
        rules_path, questions_path, predictor_path, kind, interface, names, rate, command_stale_s, hold_period_s,
        state_stale_s, period,
    )  # fmt: skip


def watch_inputs(node: Node, *, on_change) -> GraphWatch:
    """Who publishes the reflex's commands, predictions and signals: a stranger stops every joint while it is on."""
    return GraphWatch(
        node, ("commands", "predictions", "signals"), acting="fail-safe stop, every joint held", on_change=on_change
    )


def fixed_clock(parameters) -> SetParametersResult:
    """Refuse ``use_sim_time`` at run time (rclpy takes it otherwise): the clock staleness is judged on is fixed."""
    if any(parameter.name == "use_sim_time" for parameter in parameters):
        return SetParametersResult(
            successful=False, reason="use_sim_time is fixed once the reflex is up (set it at start)"
        )
    return SetParametersResult(successful=True)


def load_command_path(s: ReflexSettings):
    """The command form, the rules (checked against the questions, the joints and the predictor), the questions
    and the rules file.

    The questions come first: their file's ``extensions`` may register a command form (docs/extending.md).

    Raises:
      ValueError or OSError: a file missing or malformed, an unknown command form, or rules naming what is
      not there.
    """
    questions = pathlib.Path(s.questions_path).expanduser() if s.questions_path else config_file("reflex_questions")
    spec = load_questions(questions)
    form = make_form(s.command_type, s.interface, s.joint_names)
    predictor = PredictorSpec.from_parameters(
        pathlib.Path(s.predictor_path) if s.predictor_path else config_file("arm")
    )
    rules_file = pathlib.Path(s.rules_path).expanduser() if s.rules_path else config_file("reflex_rules")
    rule_set = load_rules(rules_file, questions=spec, joint_names=list(form.names), predictor=predictor)
    return form, rule_set, spec, rules_file


def signal_readers(rule_set: RuleSet, spec: HordeSpec) -> dict[str, list]:
    """Topic -> [(rule index, cumulant, its field path)] of the rules that read the present signal.

    Raises:
      ValueError: a cumulant's field that its message type does not have.
    """
    questions = {q.name: q for q in spec.questions}
    signals: dict[str, list] = {}
    for i, rule in enumerate(rule_set.rules):
        if rule.source == "signal":
            cumulant = questions[rule.question].cumulant
            check_field(message_class(cumulant.type), cumulant.field)
            signals.setdefault(cumulant.topic, []).append((i, cumulant, cumulant.path))
    return signals
