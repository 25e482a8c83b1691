"""The neural predictor's health: its training state, ``/diagnostics`` values and log lines."""

from __future__ import annotations

from gamma_net_core.neural.learner import NeuralConfig
from gamma_net_core.neural.online import SkipReason, TransitionStream
from gamma_net_ros.diagnostics import ERROR, OK, WARN, Health
from gamma_net_ros.graph_watch import Arrivals


class InputCounts:
    """The node's input counts since it started: a resumed stream's own counters run on from its checkpoint.

    ``received`` (handed to the node) = ``processed`` (moved into the replay) + ``skipped`` + ``queued``;
    ``lost`` counts what the publishers sent and the node never got (:class:`Arrivals`).
    """

    def __init__(self, stream: TransitionStream) -> None:
        self.stream = stream
        self.arrivals = Arrivals()
        self._drained = stream.drained
        self._skipped = dict(stream.skipped)

    def values(self) -> dict[str, int]:
        """``received``, ``processed``, ``skipped``, ``queued``, ``lost`` and ``skipped.<reason>``, since start."""
        s = self.stream
        skipped = {kind: count - self._skipped.get(kind, 0) for kind, count in s.skipped.items()}
        return {
            "received": self.arrivals.received,
            "processed": s.drained - self._drained,
            "skipped": sum(skipped.values()),
            "queued": s.queued,
            "lost": self.arrivals.lost,
            **{f"skipped.{kind}": count for kind, count in skipped.items()},
        }


def training_state(s: TransitionStream) -> str:
    """What the learner is doing, in words (stopped, filling the replay, training, behind)."""
    if s.learner.stopped is not None:
        return "stopped: " + s.learner.stopped
    if s.learner.transitions < s.config.min_replay_history:
        return f"filling the replay ({s.learner.transitions} of {s.config.min_replay_history} steps)"
    return "training" if s.owed_updates <= 1 else f"training, {s.owed_updates} updates behind"


def stream_health(s: TransitionStream, last_checkpoint: str, counts: InputCounts) -> Health:
    """ERROR once training stopped, WARN after any skipped or lost message, else OK; with the stream's counts."""
    values = counts.values()
    skipped, lost = values["skipped"], values["lost"]
    if s.learner.stopped is not None:
        level = ERROR
    else:
        level = WARN if skipped or lost else OK
    values = {
        **values,
        "taken": s.taken,
        "gaps": s.gaps,
        "transitions": s.learner.transitions,
        "replay_size": s.learner.replay.size,
        "updates": s.learner.updates,
        "updates_behind": s.owed_updates,
        "last_checkpoint": last_checkpoint,
    }
    said = [f"{n} messages {what}" for n, what in ((skipped, "skipped"), (lost, "lost on the way")) if n]
    return Health(level, "; ".join([training_state(s), *said]), values)


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
