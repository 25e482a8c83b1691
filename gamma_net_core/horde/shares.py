"""Shares of a Horde's questions: one questions file learned by several workers (processes, machines).

A share is written as text (the horde node's ``share`` parameter)::

    ""              every question (one worker)
    "2/3"           the 2nd of 3 shares: the file's question names sorted, every 3rd from the 2nd
    "a,b,c"         exactly the questions named (each must be in the file)

The i-of-n shares partition the questions by name: every question is in exactly one of the n
shares whatever the file's order, and the shares differ in size by at most one. A share keeps
the file's order of its questions.

Learning is the same in every split: the tile coder and Gamma_t are drawn from the file's seed
(not from the questions), the state features are shared and each question has its own weights
(and, with Autostep, its own step sizes; with TD(lambda), its own termination's traces), so a
question's predictions in a share equal its predictions in the whole Horde on the same stream.
Two things do couple questions in one process, and differ in a split: an update one question
refuses (a weight that would overflow) is refused for every question of its process, and a tick
is skipped when any topic the process reads is silent or stale, so a share that does not read a
stale topic goes on learning.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from gamma_net_core.horde.questions import HordeSpec

_FRACTION = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def share_names(names: Sequence[str], share: str) -> tuple[str, ...]:
    """The names of ``names`` in ``share`` (see the module docstring), in their given order.

    Raises:
      ValueError: one line naming a malformed share, an unknown question or an empty share.
    """
    names = tuple(names)
    text = share.strip()
    if not text:
        return names
    if match := _FRACTION.match(text):
        i, n = int(match.group(1)), int(match.group(2))
        if not 1 <= i <= n:
            raise ValueError(f"share {share!r}: must be i/n with 1 <= i <= n")
        chosen = set(sorted(names)[i - 1 :: n])
        if not chosen:
            raise ValueError(f"share {share!r} is empty: {len(names)} questions make fewer than {n} shares")
        return tuple(name for name in names if name in chosen)
    listed = [part.strip() for part in text.split(",")]
    if any(not part for part in listed) or len(set(listed)) != len(listed):
        raise ValueError(f"share {share!r}: give i/n or distinct question names separated by commas")
    unknown = [part for part in listed if part not in names]
    if unknown:
        raise ValueError(f"share {share!r}: no question {unknown[0]!r} in the questions file")
    return tuple(name for name in names if name in set(listed))


def share_spec(spec: HordeSpec, share: str) -> HordeSpec:
    """``spec`` with only the questions of ``share`` (the rest of it, seed included, unchanged)."""
    kept = set(share_names(spec.names, share))
    return dataclasses.replace(spec, questions=tuple(q for q in spec.questions if q.name in kept))
