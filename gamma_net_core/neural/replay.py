"""Prioritized replay of raw steps, returning n-step transitions undiscounted.

The paper's change to Dopamine's prioritized buffer (appendix, "Atari Details"):
Dopamine folds one γ into each stored n-step return, which a Γ-net cannot use. This
buffer stores one raw record per step and never a return:

    record t = (φ(S_t) float32, C_{t+1}, terminal_t, truncated_t)

``terminal_t``: S_{t+1} is terminal (nothing is bootstrapped after C_{t+1}).
``truncated_t``: the episode was cut after this step without reaching a terminal
state (e.g. at 27,000 steps), so S_{t+1} was never recorded; the next record starts
a new episode. These are the fields of a ``gamma_net_msgs/Transition`` message.

A sample is the window starting at record t: the n cumulants C_{t+1..t+n}, how many of
them count, and the state to bootstrap from. Each γ_k is applied afterwards
(:meth:`NStepBatch.nstep_returns`, :meth:`NStepBatch.bootstrap_discounts`), vectorized
to [batch, n_gammas]. A window stops at the first episode end inside it:

- terminal at t+j: j+1 cumulants, nothing bootstrapped;
- truncated at t+j with j >= 1: j cumulants, bootstrap from S_{t+j} (the last state
  recorded; the cut hides S_{t+j+1}), a shorter but exact n-step target;
- truncated at t itself: no target can be formed, so the record is never sampled;
- no end: n cumulants, bootstrap from S_{t+n}.

A window becomes sampleable (gets the highest priority recorded so far, as Schaul et al.
and Dopamine do for new transitions) once it is complete: when its episode end or its
bootstrap record has arrived. Until then, and after its first record is overwritten,
its priority is 0.

Priorities and importance weights follow Dopamine's Rainbow (``rainbow_agent.py``) by
default: priority = sqrt(loss + 1e-10), which is |δ| for a squared loss (the α = 1/2 of
Rainbow), sampling in proportion to priority with stratified draws, and loss weights
1 / sqrt(probability) normalized by their maximum (β = 1/2), see
:func:`importance_weights`. For a Γ-net the loss of a sample is the largest squared TD
error across Γ_t (the paper, "Training"); :data:`PRIORITY_RULES` names the two readings of
the priority (Dopamine's square root, or the paper's words taken literally).

One buffer can keep several independent sets of priorities over the same records
(``priority_sets``): one per fixed-timescale probe network, so that each probe samples what
its own errors make surprising, as separate networks with separate buffers fed the same
stream would. Every set sees the same windows become sampleable or overwritten.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.neural.sum_tree import SumTree
from gamma_net_core.returns import nstep_returns
from gamma_net_core.timescales import validate_gammas

#: Added to a loss before the square root, as Dopamine does, so no priority is ever 0.
PRIORITY_EPSILON = 1e-10
#: How a sample's priority follows from its loss (the largest squared TD error across Γ_t):
#: ``sqrt_loss``: sqrt(loss + 1e-10) = max |δ|, Dopamine Rainbow's convention
#: (``rainbow_agent._build_train_op``: ``tf.sqrt(loss + 1e-10)``), which the paper's code extends;
#: ``loss``: loss + 1e-10 = max δ², the paper's text ("the maximum squared loss across Γ_t").
PRIORITY_RULES = ("sqrt_loss", "loss")


class NStepBatch(NamedTuple):
    """A batch of n-step windows, undiscounted. B = batch size, D = |φ|, n = the window length."""

    indices: np.ndarray  # int64 [B]: buffer slots, for update_priorities
    features: np.ndarray  # float32 [B, D]: φ(S_t)
    cumulants: np.ndarray  # float64 [B, n]: C_{t+1..t+n}; 0 past `lengths`
    lengths: np.ndarray  # int64 [B]: how many cumulants count (< n when the episode ended inside)
    bootstrap_features: np.ndarray  # float32 [B, D]: φ(S_{t+length}); meaningless where not `bootstrap`
    bootstrap: np.ndarray  # bool [B]: False when a terminal state ended the window
    probabilities: np.ndarray  # float64 [B]: the probability with which each was sampled
    bootstrap_indices: np.ndarray | None = None  # int64 [B]: the slots of bootstrap_features

    def nstep_returns(self, gammas) -> np.ndarray:
        """sum_{j < length} γ^j C_{t+1+j} for each sample and γ: float64 [B, G]."""
        return nstep_returns(self.cumulants, gammas, lengths=self.lengths)

    def bootstrap_discounts(self, gammas) -> np.ndarray:
        """γ^length where a state is bootstrapped from, else 0: float64 [B, G]."""
        g = validate_gammas(gammas)
        return np.where(self.bootstrap[:, None], g[None, :] ** self.lengths[:, None], 0.0)


def importance_weights(probabilities) -> np.ndarray:
    """Dopamine Rainbow's loss weights: 1 / sqrt(p + 1e-10), divided by their maximum (β = 1/2)."""
    w = 1.0 / np.sqrt(np.asarray(probabilities, dtype=np.float64) + PRIORITY_EPSILON)
    return w / w.max()


def priorities_from_losses(losses, rule: str = "sqrt_loss") -> np.ndarray:
    """Each sample's priority from its loss [B] (or [B, G]: the max over G), by ``rule``.

    Args:
      losses: squared TD errors, [B] or [B, G].
      rule: ``sqrt_loss`` (Dopamine Rainbow: sqrt(loss + 1e-10)) or ``loss`` (the paper's words: loss + 1e-10).

    Returns:
      float64 [B], every value > 0.
    """
    if rule not in PRIORITY_RULES:
        raise ValueError(f"priority rule must be one of {list(PRIORITY_RULES)}; got {rule!r}")
    loss = np.asarray(losses, dtype=np.float64)
    if loss.ndim == 2:
        loss = loss.max(axis=1)
    loss = loss + PRIORITY_EPSILON
    return np.sqrt(loss) if rule == "sqrt_loss" else loss


@numba.njit(cache=True)
def _assemble(
    slots, features, cumulants, terminals, truncateds, n, phi, phi_t, windows, lengths, bootstrap, last_slots
):
    """Fill a batch's arrays with the windows at ``slots``, walking each to its first episode end.

    ``phi``/``phi_t`` of width 0 skip copying φ (a learner that gathers φ on its device from ``last_slots``).
    """
    C = cumulants.shape[0]
    for i in range(slots.shape[0]):
        s = slots[i]
        length = n
        boot = True
        for j in range(n):
            r = (s + j) % C
            if terminals[r]:
                windows[i, j] = cumulants[r]
                length = j + 1
                boot = False
                break
            if truncateds[r]:
                length = j  # S_{t+j} is the last state recorded; a sampleable window has j >= 1
                break
            windows[i, j] = cumulants[r]
        for j in range(length, n):
            windows[i, j] = 0.0
        last = (s + length) % C if boot else (s + length - 1) % C
        last_slots[i] = last
        for d in range(phi.shape[1]):
            phi[i, d] = features[s, d]
        for d in range(phi_t.shape[1]):
            phi_t[i, d] = features[last, d]
        lengths[i] = length
        bootstrap[i] = boot


def rng_to_array(rng: np.random.Generator) -> np.ndarray:
    """A generator's state as uint8 JSON bytes, for an ``.npz`` checkpoint (read back by the replay's loader)."""
    return np.frombuffer(json.dumps(rng.bit_generator.state).encode("utf-8"), dtype=np.uint8).copy()


def _rng_from_array(rng: np.random.Generator, blob) -> None:
    state = json.loads(np.asarray(blob, dtype=np.uint8).tobytes().decode("utf-8"))
    if state.get("bit_generator") != type(rng.bit_generator).__name__:
        raise ValueError(f"replay state's generator is {state.get('bit_generator')!r}, not {type(rng.bit_generator)}")
    rng.bit_generator.state = state


def _tree_key(i: int) -> str:
    """State-dict prefix of priority set i (set 0 keeps the one-set layout's ``tree_``)."""
    return "tree_" if i == 0 else f"tree{i}_"


class PrioritizedReplay:
    """A circular buffer of raw steps with a sum tree over the windows that start at each.

    Args:
      capacity: records kept (the paper: 100,000); the oldest is overwritten first.
      feature_size: |φ| (the paper: 512).
      n: the window length, the n of n-step returns (the paper: 4).
      rng: the generator for sampling; its state is part of :meth:`to_state_dict`.
      priority_sets: independent sets of priorities over the same records (one per probe network; 1 for a Γ-net).
    """

    def __init__(
        self,
        *,
        capacity: int = 100_000,
        feature_size: int = 512,
        n: int = 4,
        rng: np.random.Generator,
        priority_sets: int = 1,
    ):
        if capacity <= n:
            raise ValueError(f"replay capacity {capacity!r} must exceed the window length n = {n!r}")
        if n < 1:
            raise ValueError(f"window length n must be >= 1; got {n!r}")
        if feature_size < 1:
            raise ValueError(f"feature_size must be >= 1; got {feature_size!r}")
        if priority_sets < 1:
            raise ValueError(f"priority_sets must be >= 1; got {priority_sets!r}")
        self.capacity = int(capacity)
        self.feature_size = int(feature_size)
        self.n = int(n)
        self.rng = rng
        self.features = np.zeros((self.capacity, self.feature_size), dtype=np.float32)
        self.cumulants = np.zeros(self.capacity, dtype=np.float64)
        self.terminals = np.zeros(self.capacity, dtype=np.bool_)
        self.truncateds = np.zeros(self.capacity, dtype=np.bool_)
        #: One sum tree per set of priorities; all hold the same sampleable windows.
        self.trees = [SumTree(self.capacity) for _ in range(int(priority_sets))]
        #: Records ever added; record number g lives in slot g % capacity.
        self.added = 0

    @property
    def tree(self) -> SumTree:
        """The first (for a Γ-net the only) set of priorities."""
        return self.trees[0]

    @property
    def priority_sets(self) -> int:
        return len(self.trees)

    @property
    def size(self) -> int:
        """Records held now."""
        return min(self.added, self.capacity)

    @property
    def can_sample(self) -> bool:
        """True once at least one window is complete."""
        return self.tree.total > 0.0

    def validate(self, features, cumulants, terminals, truncateds):
        """Check a batch of records; return them as arrays or raise naming the first bad value."""
        raw = np.asarray(features)
        if raw.ndim == 1:
            raw = raw[None, :]
        if raw.ndim != 2 or raw.shape[1] != self.feature_size or not np.issubdtype(raw.dtype, np.number):
            raise ValueError(f"features must be [T, {self.feature_size}] numbers; got shape {np.shape(features)}")
        with np.errstate(over="ignore"):
            phi = raw.astype(np.float32, copy=False)
        c = np.atleast_1d(np.asarray(cumulants, dtype=np.float64))
        term = np.atleast_1d(np.asarray(terminals))
        trunc = np.atleast_1d(np.asarray(truncateds))
        for name, a in (("cumulants", c), ("terminals", term), ("truncateds", trunc)):
            if a.shape != (phi.shape[0],):
                raise ValueError(f"{name} must have one value per record ({phi.shape[0]}); got shape {a.shape}")
        for name, a in (("terminals", term), ("truncateds", trunc)):
            if a.dtype != np.bool_ and not np.isin(a, (0, 1)).all():
                raise ValueError(f"{name} must be booleans; got {a[~np.isin(a, (0, 1))][0].item()!r}")
        bad_rows = ~np.isfinite(phi).all(axis=1)
        if bad_rows.any():
            t = int(np.flatnonzero(bad_rows)[0])
            j = int(np.flatnonzero(~np.isfinite(phi[t]))[0])
            raise ValueError(
                f"features must be finite float32 values; got {float(raw[t, j])!r} at record {t}, feature {j}"
            )
        if not np.isfinite(c).all():
            t = int(np.flatnonzero(~np.isfinite(c))[0])
            raise ValueError(f"cumulants must be finite; got {float(c[t])!r} at record {t}")
        return phi, c, term.astype(np.bool_), trunc.astype(np.bool_)

    def add(self, features, cumulants, terminals, truncateds) -> None:
        """Append records (one, or a batch of T in stream order).

        Args:
          features: [D] or [T, D], φ(S_t) of each record.
          cumulants: [T], C_{t+1}.
          terminals, truncateds: bool [T] (see the module docstring).

        Raises:
          ValueError: wrong sizes, NaN or infinite values; the buffer is then unchanged.
        """
        phi, c, term, trunc = self.validate(features, cumulants, terminals, truncateds)
        chunk = self.capacity - self.n  # a chunk never overwrites the windows it completes
        for start in range(0, phi.shape[0], chunk):
            part = slice(start, start + chunk)
            self._add(phi[part], c[part], term[part], trunc[part])

    def _add(self, phi, c, term, trunc) -> None:
        first, count = self.added, phi.shape[0]
        slots = np.arange(first, first + count) % self.capacity
        # The windows that started in these slots are gone with their first record.
        for tree in self.trees:
            tree.set(slots, np.zeros(count))
        self.features[slots] = phi
        self.cumulants[slots] = c
        self.terminals[slots] = term
        self.truncateds[slots] = trunc
        self.added = first + count
        # Windows that may have become complete: the n before this chunk and those in it.
        starts = np.arange(max(first - self.n, self.added - self.capacity, 0), self.added)
        complete = self._complete(starts)
        complete_slots = starts[complete] % self.capacity
        for tree in self.trees:  # each set gives a new window its own highest priority so far
            new = complete_slots[tree.get(complete_slots) == 0.0]
            tree.set(new, np.full(new.shape[0], tree.max_recorded_priority))

    def _complete(self, starts: np.ndarray) -> np.ndarray:
        """Whether the windows starting at record numbers ``starts`` can be sampled now."""
        records = starts[:, None] + np.arange(self.n)[None, :]
        present = records < self.added
        rows = records % self.capacity
        term = self.terminals[rows] & present
        end = (term | self.truncateds[rows]) & present
        has_end = end.any(axis=1)
        first = np.argmax(end, axis=1)  # the first episode end inside the window
        by_terminal = term[np.arange(starts.shape[0]), first]
        return np.where(has_end, by_terminal | (first >= 1), starts + self.n < self.added)

    def sample(
        self, batch_size: int, priority_set: int = 0, rng: np.random.Generator | None = None, *, features: bool = True
    ) -> NStepBatch:
        """Sample windows in proportion to one set's priorities (stratified, as Dopamine), undiscounted.

        Args:
          rng: draw with this generator instead of the buffer's (a learner ensemble: one per learner).
          features: copy φ into the batch (False: ``features`` and ``bootstrap_features`` are [B, 0], for
            a learner that gathers φ from its own copy at ``indices`` and ``bootstrap_indices``).

        Raises:
          ValueError: no window is complete yet.
        """
        if not self.can_sample:
            raise ValueError(f"no complete {self.n}-step window to sample yet ({self.added} records added)")
        slots, probabilities = self.trees[priority_set].stratified_sample(batch_size, rng or self.rng)
        return self.assemble(slots, probabilities, features=features)

    def assemble(self, slots, probabilities=None, *, features: bool = True) -> NStepBatch:
        """The windows starting at ``slots`` as an :class:`NStepBatch`.

        Raises:
          ValueError: a slot holds no sampleable window (incomplete, emptied, or cut at its first step).
        """
        slots = np.asarray(slots, dtype=np.int64)
        if probabilities is None:
            priorities = self.tree.get(slots)
            if (priorities <= 0.0).any():
                i = int(np.flatnonzero(priorities <= 0.0)[0])
                raise ValueError(f"replay slot {int(slots[i])} holds no sampleable window")
            probabilities = priorities / self.tree.total
        B, D = slots.shape[0], self.feature_size if features else 0
        batch = NStepBatch(
            indices=slots,
            features=np.empty((B, D), dtype=np.float32),
            cumulants=np.empty((B, self.n), dtype=np.float64),
            lengths=np.empty(B, dtype=np.int64),
            bootstrap_features=np.empty((B, D), dtype=np.float32),
            bootstrap=np.empty(B, dtype=np.bool_),
            probabilities=np.asarray(probabilities, dtype=np.float64),
            bootstrap_indices=np.empty(B, dtype=np.int64),
        )
        _assemble(
            slots,
            self.features,
            self.cumulants,
            self.terminals,
            self.truncateds,
            self.n,
            batch.features,
            batch.bootstrap_features,
            batch.cumulants,
            batch.lengths,
            batch.bootstrap,
            batch.bootstrap_indices,
        )
        return batch

    def update_priorities(self, indices, priorities, priority_set: int = 0) -> None:
        """Set new priorities of one set for sampled windows (e.g. :func:`priorities_from_losses`).

        Slots whose window stopped being sampleable since it was sampled (overwritten) are
        left at 0, so a stale index can never make an incomplete window sampleable.

        Raises:
          IndexError, ValueError: an index out of range, or a priority that is not finite and > 0.
        """
        self.trees[priority_set].update_positive(indices, priorities)

    def to_state_dict(self) -> dict[str, np.ndarray]:
        """The whole state as plain arrays (records held, priorities, counters, the generator's state)."""
        held = self.size
        return {
            "shape": np.array([self.capacity, self.feature_size, self.n], dtype=np.int64),
            "added": np.array(self.added, dtype=np.int64),
            "features": self.features[:held].copy(),
            "cumulants": self.cumulants[:held].copy(),
            "terminals": self.terminals[:held].copy(),
            "truncateds": self.truncateds[:held].copy(),
            **{f"{_tree_key(i)}{k}": v for i, tree in enumerate(self.trees) for k, v in tree.to_state_dict().items()},
            "rng": rng_to_array(self.rng),
        }

    def from_state_dict(self, state) -> None:
        """Restore :meth:`to_state_dict`'s arrays; refuses another capacity, feature size or n."""
        shape = tuple(int(v) for v in np.asarray(state["shape"]))
        if shape != (self.capacity, self.feature_size, self.n):
            raise ValueError(
                f"replay state is (capacity, feature_size, n) = {shape}; "
                f"this buffer is {(self.capacity, self.feature_size, self.n)}"
            )
        added = int(np.asarray(state["added"]).reshape(()))
        held = min(added, self.capacity)
        arrays = {k: np.asarray(state[k]) for k in ("features", "cumulants", "terminals", "truncateds")}
        for name, a in arrays.items():
            if a.shape[0] != held:
                raise ValueError(f"replay state: {name} holds {a.shape[0]} records, expected {held}")
        sets = sum(1 for k in state if k.startswith("tree") and k.endswith("_priorities"))
        if sets != len(self.trees):
            raise ValueError(f"replay state holds {sets} sets of priorities; this buffer keeps {len(self.trees)}")
        trees = []
        for i in range(sets):
            prefix = _tree_key(i)
            tree = SumTree(self.capacity)
            tree.from_state_dict({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)})
            trees.append(tree)
        _rng_from_array(self.rng, state["rng"])
        self.trees = trees
        self.added = added
        self.features[:held] = arrays["features"]
        self.cumulants[:held] = arrays["cumulants"]
        self.terminals[:held] = arrays["terminals"]
        self.truncateds[:held] = arrays["truncateds"]
