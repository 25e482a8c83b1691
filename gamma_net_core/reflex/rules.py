"""Reflex rules as data: a YAML file parsed into :class:`Rule` objects, refused in one line if wrong.

A rules file::

    stale_after_s: 0.5          # an input older than this is stale (s; at most 60)
    fail_safe: stop             # what a rule whose input is stale does: hold, pass or stop (every
                                #   joint held; also {stop: all}), or {stop: [linear.x]}: those held, the rest free
    rules:
      - name: shoulder_stall_ahead
        source: prediction      # prediction (default) or signal: the same rule on the present signal
        question: shoulder_effort
        tau: 10                 # a timescale in steps (or `readout: NAME`, prediction only)
        # from: predictor       # instead of the Horde: the predictor node's Prediction, question
        #                       #   naming its cumulant (e.g. |shoulder.velocity|)
        above: 0.5              # or `below:`; the condition's threshold
        release: 0.3            # hysteresis: the rule lets go past this (default: the threshold)
        hold_s: 0.5             # once on, it stays on at least this long (default 0)
        response: {scale: 0.0, joints: [shoulder], direction: positive}   # or {event: true}
        # fail_safe: {stop: [shoulder]}   # a rule's own fail-safe (default: the file's)

What a rule compares with its threshold, so that the same threshold means the same on both sources:

- ``source: signal``: the question's cumulant now (its field of the latest message, transformed).
- ``source: prediction`` with ``tau``: ``(1 - gamma) V_gamma``, the prediction scaled to the
  cumulant's units (a weighted average of the cumulant over about the next tau steps), as the
  paper's figures put timescales on one axis.
- ``source: prediction`` with ``readout``: the readout's value as published.

Responses: ``scale`` multiplies the velocity commands of ``joints`` (0 zeroes them), only those
moving in ``direction`` (``positive``, ``negative`` or ``both``, the default), so a reflex can stop
motion toward a hazard and still let the arm move away from it. ``event: true`` only publishes
an event. Every rule's switching on and off is published as an event either way.

Fail-safes (``fail_safe``, the file's default and each rule's own): ``hold`` keeps a stale rule as
it is, ``pass`` switches it off, ``stop`` (or ``{stop: all}``) switches it off and holds every
joint the reflex knows. ``{stop: [joints]}`` holds only the joints (or a base's axes) it names and
leaves the others to the rules: a base whose range rule cannot see stops driving forward
(``linear.x``) and can still turn away. ``stop`` is the default because only the robot's own
designer knows which axes are safe to leave free.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gamma_net_core.config import read_document
from gamma_net_core.horde.questions import HordeSpec

SOURCES = ("prediction", "signal")
FAIL_SAFES = ("hold", "pass", "stop")
#: ``{stop: all}``: the fail-safe stop of every joint, as ``stop`` says it.
STOP_ALL = "all"
DIRECTIONS = ("both", "positive", "negative")
ORIGINS = ("horde", "predictor")
_RULE_KEYS = {
    "from",
    "name",
    "source",
    "question",
    "tau",
    "readout",
    "above",
    "below",
    "release",
    "hold_s",
    "response",
    "fail_safe",
}
_RESPONSE_KEYS = {"scale", "joints", "direction", "event"}
_TOP_KEYS = {"stale_after_s", "fail_safe", "rules"}
#: s; the longest an input may go unseen before its rule is stale. The fail-safe is for the
#: predictions going quiet; a minute of silence is already no safety net (the Horde publishes at
#: 30 Hz), and a larger bound (``1e12``) would only disable it by mistake.
MAX_STALE_AFTER_S = 60.0
#: s; the longest a rule may stay on once on. A hold is hysteresis in time (a second or two);
#: an hour is far past any, and a larger one (``1e308``) would only hold a joint for good by mistake.
MAX_HOLD_S = 3600.0
#: steps; the largest tau a predictor rule may read when the predictor's own range is not given.
#: Far past any timescale a predictor publishes (config/arm.yaml: tau 1-100).
MAX_PREDICTOR_TAU = 10_000.0


@dataclass(frozen=True)
class PredictorSpec:
    """What a predictor node publishes, so a ``from: predictor`` rule is checked against it.

    Attributes:
      cumulants: the names its Prediction messages carry (``question``), e.g. ``|shoulder.velocity|``.
      tau_max: the largest timescale it learns, steps.
    """

    cumulants: tuple[str, ...]
    tau_max: float

    @classmethod
    def from_parameters(cls, path: str | pathlib.Path) -> PredictorSpec:
        """The predictor's, from its ``predictor:`` section of a parameter file (e.g. config/arm.yaml)."""
        from gamma_net_core.config import load_config
        from gamma_net_core.data.joints import JointsConfig
        from gamma_net_core.timescales import TimescaleSampling

        joints = load_config(JointsConfig, path, "predictor", "joints")
        return cls((joints.cumulant_name,), load_config(TimescaleSampling, path, "predictor", "timescales").tau_max)


@dataclass(frozen=True)
class Response:
    """What a rule does while it is on.

    Attributes:
      joints: joint names whose velocity commands are scaled (empty for an event-only rule).
      scale: factor applied to those commands, in [0, 1] (0 zeroes them).
      direction: scale only commands moving this way: ``positive``, ``negative`` or ``both``.
      event: an event-only rule (commands untouched).
    """

    joints: tuple[str, ...] = ()
    scale: float = 1.0
    direction: str = "both"
    event: bool = False


@dataclass(frozen=True)
class Rule:
    """One fixed response to a prediction or a signal crossing a threshold.

    Attributes:
      name: the rule's name, unique in its file (events carry it).
      origin: ``horde`` (a question of the Horde's PredictionArray) or ``predictor`` (the
        predictor node's Prediction, whose ``question`` field names it).
      source: ``prediction`` or ``signal``.
      question: the Horde question whose prediction (or cumulant) is watched.
      tau: the timescale in steps, for a prediction (None with a readout or a signal).
      readout: a readout's name instead of ``tau`` (prediction only).
      above: True: on when the value rises above ``threshold``; False: when it falls below.
      threshold: where the rule switches on.
      release: where it switches off again (at or below the threshold for ``above``; at or above for ``below``).
      hold_s: once on, the rule stays on at least this long, s.
      fail_safe: what it does while its input is stale: ``hold`` (stay as it is), ``pass``
        (off), ``stop`` (off, and hold the joints of ``stop_joints``).
      response: what it does while on.
      stop_joints: the joints (or axes) a ``stop`` holds, in file order; None: every joint the
        reflex knows (``stop``, ``{stop: all}``).
    """

    name: str
    origin: str
    source: str
    question: str
    tau: float | None
    readout: str | None
    above: bool
    threshold: float
    release: float
    hold_s: float
    fail_safe: str
    response: Response
    stop_joints: tuple[str, ...] | None = None

    @property
    def fail_safe_label(self) -> str:
        """The fail-safe in words, as the rules file says it (``stop``, ``stop [linear.x]``)."""
        if self.fail_safe == "stop" and self.stop_joints is not None:
            return f"stop {list(self.stop_joints)}"
        return self.fail_safe

    def is_met(self, value: float) -> bool:
        """Whether ``value`` is past the threshold (switches the rule on)."""
        return value > self.threshold if self.above else value < self.threshold

    def is_released(self, value: float) -> bool:
        """Whether ``value`` is back past the release level (lets the rule switch off)."""
        return value < self.release if self.above else value > self.release


@dataclass(frozen=True)
class RuleSet:
    """A parsed rules file.

    Attributes:
      rules: the rules, in file order.
      stale_after_s: s; an input older than this is stale.
    """

    rules: tuple[Rule, ...]
    stale_after_s: float

    @property
    def joints(self) -> tuple[str, ...]:
        """Every joint some rule scales, in first-named order."""
        out: list[str] = []
        for rule in self.rules:
            out += [j for j in rule.response.joints if j not in out]
        return tuple(out)


def load_rules(
    source: str | pathlib.Path | Mapping[str, Any],
    *,
    questions: HordeSpec,
    joint_names: Sequence[str],
    predictor: PredictorSpec | None = None,
) -> RuleSet:
    """Parse a rules file (or mapping) against the Horde it reads and the joints it may command.

    Args:
      source: a YAML file or an already-parsed mapping.
      questions: the Horde's questions, readouts and learned timescale range.
      joint_names: the joints (or a base's axes) whose commands pass through the reflex.
      predictor: what the predictor publishes, for ``from: predictor`` rules (None: any
        cumulant name, tau up to :data:`MAX_PREDICTOR_TAU`).

    Returns:
      The :class:`RuleSet`.

    Raises:
      FileNotFoundError: no such file.
      ValueError: one line naming the file, the rule and the key at fault (unknown question,
        readout, joint or predictor cumulant, a timescale outside the learner's range, a missing,
        unknown or duplicated key, ``stale_after_s`` above :data:`MAX_STALE_AFTER_S`, a fail-safe
        stop naming an unknown joint, a joint twice, or none).
    """
    doc, where = read_document(source, kind="rules")
    try:
        return _rule_set(doc, questions, tuple(joint_names), predictor)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _rule_set(doc: Any, questions: HordeSpec, joint_names: tuple[str, ...], predictor: PredictorSpec | None) -> RuleSet:
    if not isinstance(doc, Mapping):
        raise ValueError(f"expected a mapping with 'rules'; got {type(doc).__name__}")
    _known(doc, _TOP_KEYS, "the file")
    stale = _number(doc.get("stale_after_s", 0.5), "stale_after_s", low=0.0, high=MAX_STALE_AFTER_S)
    if stale <= 0:
        raise ValueError(f"stale_after_s must be positive; got {stale!r}")
    default_fail_safe = _fail_safe(doc.get("fail_safe", "stop"), joint_names)
    entries = doc.get("rules")
    if not isinstance(entries, list) or not entries:
        raise ValueError("'rules' must be a non-empty list")
    rules = []
    for i, entry in enumerate(entries):
        label = f"rule {i}"
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            label = f"rule {entry['name']!r}"
        try:
            rules.append(_rule(entry, questions, joint_names, default_fail_safe, predictor))
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from None
    if (twice := first_duplicate(r.name for r in rules)) is not None:
        raise ValueError(f"rule {twice!r}: the name is used more than once")
    return RuleSet(rules=tuple(rules), stale_after_s=stale)


def first_duplicate(names: Iterable[str]) -> str | None:
    """The first name met a second time, or None: one pass (a 20,000-rule file is checked at once).

    Args:
      names: rule (or joint) names in file order.
    """
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return None


def _rule(
    m: Any,
    questions: HordeSpec,
    joint_names: tuple[str, ...],
    default_fail_safe: tuple[str, tuple[str, ...] | None],
    predictor: PredictorSpec | None,
) -> Rule:
    if not isinstance(m, Mapping):
        raise ValueError(f"expected a mapping; got {type(m).__name__}")
    _known(m, _RULE_KEYS, "the rule")
    for key in ("name", "question", "response"):
        if key not in m:
            raise ValueError(f"missing key {key!r}")
    name = m["name"]
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string; got {name!r}")
    source = _choice(m.get("source", "prediction"), SOURCES, "source")
    question = m["question"]
    origin = _choice(m.get("from", "horde"), ORIGINS, "from")
    if origin == "predictor":
        if source != "prediction" or "readout" in m:
            raise ValueError("a predictor rule reads the predictor's Prediction at a tau: no signal source, no readout")
        if not isinstance(question, str) or not question:
            raise ValueError(
                f"question must name the predictor's cumulant (e.g. |shoulder.velocity|); got {question!r}"
            )
        if predictor is not None and question not in predictor.cumulants:
            raise ValueError(f"unknown predictor cumulant {question!r}; the predictor's: {list(predictor.cumulants)}")
    elif question not in questions.names:
        raise ValueError(f"unknown question {question!r}; the Horde's questions: {list(questions.names)}")
    tau = readout = None
    if origin == "predictor":
        tau = _number(m.get("tau"), "tau", low=1.0)
        high = predictor.tau_max if predictor is not None else MAX_PREDICTOR_TAU
        if tau > high:
            raise ValueError(f"tau {tau:g} is beyond the predictor's largest timescale, tau {high:g}")
    elif source == "prediction":
        if ("tau" in m) == ("readout" in m):
            raise ValueError("a prediction rule needs exactly one of 'tau' or 'readout'")
        if "tau" in m:
            tau = _number(m["tau"], "tau")
            low, high = questions.timescales.tau_min, questions.timescales.tau_max
            if not low <= tau <= high:
                raise ValueError(f"tau {tau:g} is outside the learner's range [{low:g}, {high:g}]")
        else:
            readout = m["readout"]
            if readout not in [r.name for r in questions.readouts]:
                raise ValueError(f"unknown readout {readout!r}; readouts: {[r.name for r in questions.readouts]}")
    elif "tau" in m or "readout" in m:
        raise ValueError("a signal rule reads the present signal: it takes no 'tau' or 'readout'")
    if ("above" in m) == ("below" in m):
        raise ValueError("needs exactly one of 'above' or 'below'")
    above = "above" in m
    threshold = _number(m["above" if above else "below"], "above" if above else "below")
    release = _number(m.get("release", threshold), "release")
    if (above and release > threshold) or (not above and release < threshold):
        side = "at or below" if above else "at or above"
        raise ValueError(f"release {release:g} must be {side} the threshold {threshold:g}")
    hold_s = _number(m.get("hold_s", 0.0), "hold_s", low=0.0, high=MAX_HOLD_S)
    fail_safe, stop_joints = _fail_safe(m["fail_safe"], joint_names) if "fail_safe" in m else default_fail_safe
    return Rule(
        name=name,
        origin=origin,
        source=source,
        question=question,
        tau=tau,
        readout=readout,
        above=above,
        threshold=threshold,
        release=release,
        hold_s=hold_s,
        fail_safe=fail_safe,
        response=_response(m["response"], joint_names),
        stop_joints=stop_joints,
    )


def _fail_safe(value: Any, joint_names: tuple[str, ...]) -> tuple[str, tuple[str, ...] | None]:
    """``(fail_safe, stop_joints)`` of a ``fail_safe`` value: a name, or ``{stop: all}`` / ``{stop: [joints]}``."""
    if not isinstance(value, Mapping):
        if value not in FAIL_SAFES:
            raise ValueError(
                f"fail_safe must be one of {list(FAIL_SAFES)}, {{stop: all}} or {{stop: [joints]}}; got {value!r}"
            )
        return value, None
    if set(value) != {"stop"}:
        raise ValueError(
            f"fail_safe as a mapping takes one key, stop ({{stop: all}} or {{stop: [joints]}}); got {dict(value)!r}"
        )
    joints = value["stop"]
    if joints == STOP_ALL:
        return "stop", None
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) and j for j in joints):
        raise ValueError(f"fail_safe stop must be 'all' or a non-empty list of joints; got {joints!r}")
    for joint in joints:
        if joint not in joint_names:
            raise ValueError(f"fail_safe stop: unknown joint {joint!r}; the commanded joints: {list(joint_names)}")
    if (twice := first_duplicate(joints)) is not None:
        raise ValueError(f"fail_safe stop names {twice!r} twice")
    return "stop", tuple(joints)


def _response(m: Any, joint_names: tuple[str, ...]) -> Response:
    if not isinstance(m, Mapping):
        raise ValueError(f"response must be a mapping; got {m!r}")
    _known(m, _RESPONSE_KEYS, "response")
    if m.get("event", False) is True:
        if set(m) - {"event"}:
            raise ValueError("an event response takes no other keys")
        return Response(event=True)
    if "event" in m and m["event"] is not False:
        raise ValueError(f"response event must be true or false; got {m['event']!r}")
    for key in ("scale", "joints"):
        if key not in m:
            raise ValueError(f"response: missing key {key!r} (or give event: true)")
    scale = _number(m["scale"], "response scale", low=0.0, high=1.0)
    joints = m["joints"]
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) for j in joints):
        raise ValueError(f"response joints must be a non-empty list of names; got {joints!r}")
    for joint in joints:
        if joint not in joint_names:
            raise ValueError(f"unknown joint {joint!r}; the commanded joints: {list(joint_names)}")
    direction = _choice(m.get("direction", "both"), DIRECTIONS, "response direction")
    return Response(joints=tuple(joints), scale=scale, direction=direction)


def _known(m: Mapping[str, Any], known: set[str], label: str) -> None:
    unknown = sorted(set(m) - known)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {label}; expected {sorted(known)}")


def _choice(value: Any, choices: Sequence[str], label: str) -> str:
    if value not in choices:
        raise ValueError(f"{label} must be one of {list(choices)}; got {value!r}")
    return value


def _number(value: Any, label: str, *, low: float = -math.inf, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{label} must be a finite number; got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{label} must be within [{low:g}, {high:g}]; got {value!r}")
    return float(value)
