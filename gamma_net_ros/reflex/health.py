"""The reflex's health on ``/diagnostics`` and its switches as ReflexEvent rows and log lines."""

from __future__ import annotations

from builtin_interfaces.msg import Time
from gamma_net_msgs.msg import ReflexEvent

from gamma_net_core.reflex.evaluation import Change, ReflexState
from gamma_net_core.reflex.rules import RuleSet
from gamma_net_ros.diagnostics import OK, WARN, Health


def rules_health(state: ReflexState, rule_set: RuleSet, counts: dict, *, clock_stalled: bool = False) -> Health:
    """WARN while any rule's input is stale (naming the fail-safes in force, and a clock standing still), else OK."""
    stale = state.stale
    values = {"active": ",".join(state.active) or "none", "stale": ",".join(stale) or "none", **counts}
    if stale:
        fail_safes = sorted({r.fail_safe_label for r in rule_set.rules if r.name in stale})
        why = "the clock stands still: " if clock_stalled else ""
        return Health(WARN, f"{why}stale input for rules {stale}: fail-safe {'/'.join(fail_safes)}", values)
    return Health(OK, f"{len(state.active)} of {len(rule_set.rules)} rules on", values)


def clock_line(stalled: bool, limit_s: float, now: float) -> str:
    """The log line of the node's clock standing still (an error), or advancing again."""
    if stalled:
        return f"the clock has not advanced for {limit_s:g} s of steady time (at {now:.3f} s): every input is stale"
    return "the clock advances again"


def say_clock(logger, stalled: bool, limit_s: float, now: float) -> None:
    """Log :func:`clock_line`: an error when the clock stands still, info when it advances again."""
    line = clock_line(stalled, limit_s, now)
    if stalled:  # one call site per severity: rclpy refuses a call site whose severity changes
        logger.error(line)
    else:
        logger.info(line)


def stop_line(state: ReflexState) -> str:
    """The warning of a fail-safe stop beginning (or changing the joints it holds)."""
    held = (
        "every joint held" if state.stop_joints is None else f"joints {list(state.stop_joints)} held, the others free"
    )
    return f"stale input for rules {state.stale}: fail-safe stop, {held}"


def event_msg(change: Change, stamp: Time) -> ReflexEvent:
    """The ReflexEvent of one switch of a rule."""
    event = ReflexEvent(rule=change.rule.name, value=change.value, active=change.on, reason=change.reason)
    event.header.stamp = stamp
    return event


def event_line(change: Change) -> str:
    """The log line of one switch."""
    return f"rule {change.rule.name} {'on' if change.on else 'off'} ({change.reason}, value {change.value:.4g})"
