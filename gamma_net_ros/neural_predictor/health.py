"""The neural predictor's health: its training state, ``/diagnostics`` values and log lines."""

from __future__ import annotations

from gamma_net_core.neural.learner import NeuralConfig
from gamma_net_core.neural.online import SkipReason, TransitionStream
from gamma_net_ros.diagnostics import ERROR, OK, WARN, Health


def training_state(s: TransitionStream) -> str:
    """What the learner is doing, in words (stopped, filling the replay, training, behind)."""
    if s.learner.stopped is not None:
        return "stopped: " + s.learner.stopped
    if s.learner.transitions < s.config.min_replay_history:
        return f"filling the replay ({s.learner.transitions} of {s.config.min_replay_history} steps)"
    return "training" if s.owed_updates <= 1 else f"training, {s.owed_updates} updates behind"


def stream_health(s: TransitionStream, last_checkpoint: str) -> Health:
    """ERROR once training stopped, WARN after any skipped message, else OK; with the stream's counts."""
    skipped = s.skipped_total
    if s.learner.stopped is not None:
        level = ERROR
    else:
        level = WARN if skipped else OK
    values = {
        "received": s.received + skipped,
        "processed": s.drained,  # moved into the learner's replay (the others: queued or skipped)
        "taken": s.taken,
        "queued": s.queued,
        "skipped": skipped,
        "gaps": s.gaps,
        "transitions": s.learner.transitions,
        "replay_size": s.learner.replay.size,
        "updates": s.learner.updates,
        "updates_behind": s.owed_updates,
        "last_checkpoint": last_checkpoint,
        **{f"skipped.{kind}": count for kind, count in s.skipped.items()},
    }
    return Health(level, training_state(s) + (f"; {skipped} messages skipped" if skipped else ""), values)


def progress_line(s: TransitionStream) -> str | None:
    """The periodic log line; None before the first message."""
    if not (s.received or s.skipped_total):
        return None
    return (
        f"{s.received} transitions received, {s.skipped_total} skipped, {s.gaps} gaps; "
        f"{s.learner.updates} updates; {training_state(s)}"
    )


def start_line(c: NeuralConfig, taus, checkpoint) -> str:
    """The line logged once the node is built: the network, the published timescales, the checkpoint."""
    return (
        f"Γ-net on φ of {c.feature_size}, layers {list(c.hidden_sizes)}, update every {c.update_period} steps "
        f"after {c.min_replay_history}; publishing tau {taus}; "
        f"checkpoint {checkpoint}"
    )


def skip_line(msg, skip: tuple[SkipReason, str], skipped_total: int) -> str:
    """The warning about a skipped Transition ``msg``: which step, why, and how many so far."""
    reason, detail = skip
    return (
        f"skipped transition episode {msg.episode} step {msg.step} ({reason.value}: {detail}); "
        f"{skipped_total} skipped so far"
    )
