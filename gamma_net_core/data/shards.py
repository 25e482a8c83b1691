"""Transitions recorded in order, in chunked ``.npz`` shards with a small JSON index; resumable.

Row t of a recording is one step of an episode, as in ``gamma_net_msgs/Transition``:

=============  =================  ==========================================================
array          dtype, shape       meaning
=============  =================  ==========================================================
features       float32 [n, F]     φ(S_t), the policy network's penultimate layer (F = 512)
cumulants      float32 [n]        C_{t+1}: the reward received on leaving S_t, as the game scores it
clipped_cum... float32 [n]        ``clipped_cumulants``: the same reward clipped to [-1, 1], what Dopamine's
                                  runner gives its agents (``run_experiment``: ``np.clip(reward, -1, 1)``)
terminals      bool [n]           S_{t+1} is terminal: the return stops after this cumulant
truncated      bool [n]           the episode was cut after this step (27,000 steps), not over
episodes       int64 [n]          episode index, from 0
steps          int64 [n]          step index within the episode, from 0
=============  =================  ==========================================================

So ``gamma_net_core.returns.discounted_returns(cumulants, gammas, terminals=terminals)``
gives the return from every recorded state.

Versions: 2 adds ``clipped_cumulants``. A version 1 recording (raw reward only) stays
readable: its clipped column is computed on reading as ``clip(cumulants, -1, 1)``, which is
what a version 2 recorder stores, and continuing it writes version 2 shards after the old ones.

A directory holds ``index.json`` and shard files ``shard-KKKKKK-nNNNNNN.npz`` (shard K with
N rows; every shard but the last has ``shard_size`` rows). The index lists each shard's
file, row count, first row and SHA-256, the recording's ``meta`` (what made it: checked when
a recording is resumed) and an opaque ``resume`` dict (the recorder's environment, policy
and RNG state at the last committed row). Writes are atomic: a shard file is written whole
under its final name, then the index is replaced; the index is the commit point, so a crash
at any moment leaves the previous commit intact. No pickle anywhere.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import re
import zipfile
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from gamma_net_core.checkpoint import atomic_write, check_same_config

FORMAT = "gamma_net_ros.transitions"
VERSION = 2
#: Index versions this code reads (1: no clipped_cumulants column; it is derived on reading).
READABLE_VERSIONS = (1, 2)
#: Dopamine's reward clipping (run_experiment.py: np.clip(reward, -1, 1)).
REWARD_CLIP = 1.0
#: Columns a version 1 shard lacks, computed from the others on reading.
DERIVED_IN_VERSION_1 = ("clipped_cumulants",)
INDEX = "index.json"
_SHARD_NAME = re.compile(r"^shard-(\d{6})-n(\d{6,})\.npz$")
#: (name, dtype, trailing shape is the feature size) of every array in a shard.
COLUMNS = (
    ("features", np.float32),
    ("cumulants", np.float32),
    ("terminals", np.bool_),
    ("truncated", np.bool_),
    ("episodes", np.int64),
    ("steps", np.int64),
    ("clipped_cumulants", np.float32),
)


class ShardError(ValueError):
    """A transition file that cannot be used; the message names the file."""


class TransitionBatch(NamedTuple):
    """Consecutive recorded rows; ``first`` is the index of row 0 in the whole recording."""

    first: int
    features: np.ndarray
    cumulants: np.ndarray
    terminals: np.ndarray
    truncated: np.ndarray
    episodes: np.ndarray
    steps: np.ndarray
    clipped_cumulants: np.ndarray

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.cumulants.shape[0])


class Transition(NamedTuple):
    """One recorded row (see the module table)."""

    features: np.ndarray
    cumulant: float
    terminal: bool
    truncated: bool
    episode: int
    step: int
    clipped_cumulant: float


def clip_reward(reward):
    """Dopamine's clipped reward: ``reward`` clipped to [-1, 1] (same shape, float32 for arrays)."""
    return np.clip(reward, -REWARD_CLIP, REWARD_CLIP)


def _shard_name(k: int, rows: int) -> str:
    return f"shard-{k:06d}-n{rows:06d}.npz"


def _read_index(directory: pathlib.Path) -> dict[str, Any]:
    path = directory / INDEX
    if not path.is_file():
        raise FileNotFoundError(f"no transition recording at {directory} ({INDEX} is missing)")
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ShardError(f"{path} is not a readable index: {exc}") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise ShardError(f"{path} is not a transition index (format {index.get('format')!r})")
    if index.get("version") not in READABLE_VERSIONS:
        raise ShardError(
            f"{path} is version {index.get('version')}; this code reads versions {list(READABLE_VERSIONS)}"
        )
    return index


def _check_order(batch: TransitionBatch, previous: tuple[int, int, bool] | None, path) -> None:
    """Rows must continue episodes step by step; a new episode starts at step 0 after an ended one."""
    episodes, steps = batch.episodes, batch.steps
    ended = batch.terminals | batch.truncated
    if previous is not None:
        episodes = np.concatenate([[previous[0]], episodes])
        steps = np.concatenate([[previous[1]], steps])
        ended = np.concatenate([[previous[2]], ended])
    elif len(batch) and (steps[0] != 0 or episodes[0] != 0):
        raise ShardError(f"{path}: the recording must start at episode 0 step 0; got {episodes[0]}, {steps[0]}")
    same = episodes[1:] == episodes[:-1]
    good = np.where(
        same,
        (steps[1:] == steps[:-1] + 1) & ~ended[:-1],
        (episodes[1:] == episodes[:-1] + 1) & (steps[1:] == 0) & ended[:-1],
    )
    if not good.all():
        i = int(np.flatnonzero(~good)[0])
        # Element i + 1 of the checked arrays is row first + i (with the previous row prepended) or first + i + 1.
        row = batch.first + i + (0 if previous is not None else 1)
        raise ShardError(
            f"{path}: rows out of order at row {row}: episode {episodes[i]} step {steps[i]} "
            f"(ended={bool(ended[i])}) is followed by episode {episodes[i + 1]} step {steps[i + 1]}"
        )


def _load_shard(path: pathlib.Path, entry: Mapping[str, Any], feature_size: int, verify: bool) -> TransitionBatch:
    if not path.is_file():
        raise FileNotFoundError(f"transition shard {path} (listed in {path.parent / INDEX}) is missing")
    blob = path.read_bytes()
    if verify and hashlib.sha256(blob).hexdigest() != entry["sha256"]:
        raise ShardError(f"transition shard {path} is corrupt: its SHA-256 does not match {INDEX}")
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name, _ in COLUMNS if name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ShardError(f"transition shard {path} is corrupt: {exc}") from None
    rows = int(entry["count"])
    if "clipped_cumulants" not in arrays and "cumulants" in arrays:  # a version 1 shard: raw reward only
        arrays["clipped_cumulants"] = clip_reward(arrays["cumulants"]).astype(np.float32)
    for name, dtype in COLUMNS:
        if name not in arrays:
            raise ShardError(f"transition shard {path} has no {name!r} array")
        a = arrays[name]
        shape = (rows, feature_size) if name == "features" else (rows,)
        if name == "features" and a.ndim == 2 and a.shape[0] == rows and a.shape[1] != feature_size:
            raise ShardError(f"transition shard {path} holds features of size {a.shape[1]}, expected {feature_size}")
        if a.dtype != dtype or a.shape != shape:
            raise ShardError(
                f"transition shard {path}: {name} is {a.dtype} {a.shape}, expected {np.dtype(dtype)} {shape}"
            )
    if not all(np.isfinite(arrays[k]).all() for k in ("features", "cumulants", "clipped_cumulants")):
        raise ShardError(f"transition shard {path} holds NaN or infinite features or cumulants")
    return TransitionBatch(first=int(entry["first"]), **arrays)


def _check_shard_whole(path: pathlib.Path, entry: Mapping[str, Any]) -> None:
    """``path`` is there, a whole archive, with the index's row count in every column; its data is not read.

    Raises:
      ShardError: a missing, truncated or mislabelled shard, named, with what to do.
    """
    advice = f"restore it, or record into another folder; {path.parent / INDEX} lists it"
    if not path.is_file():
        raise ShardError(f"cannot continue this recording: transition shard {path} is missing ({advice})")
    rows = int(entry["count"])
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape = read_header(member)[0]
                if info.file_size < 1 or not shape or shape[0] != rows:
                    raise ValueError(f"{info.filename} has shape {shape}, not {rows} rows")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ShardError(
            f"cannot continue this recording: transition shard {path} is corrupt ({exc}; {advice})"
        ) from None


class ShardReader:
    """Streams a recording in order, validating every shard as it is read.

    Args:
      directory: the recording (holds ``index.json``).
      feature_size: the size the consumer's network expects; a recording of another size is refused.
      verify: check each shard's SHA-256 against the index (cheap next to reading it).

    Raises (on opening, or while streaming for the shard concerned):
      FileNotFoundError: no index, or a listed shard is missing (the message names it).
      ShardError: unreadable or corrupt index or shard, feature size mismatch, rows out of order.
    """

    def __init__(self, directory: str | os.PathLike, *, feature_size: int | None = None, verify: bool = True):
        self.directory = pathlib.Path(directory)
        self.index = _read_index(self.directory)
        self.feature_size = int(self.index["feature_size"])
        self.verify = verify
        if feature_size is not None and feature_size != self.feature_size:
            raise ShardError(
                f"{self.directory / INDEX}: the recording's features have size {self.feature_size}, "
                f"the network expects {feature_size}"
            )
        self.shards: list[dict[str, Any]] = list(self.index["shards"])
        self.count = int(self.index["count"])
        if sum(int(s["count"]) for s in self.shards) != self.count:
            raise ShardError(f"{self.directory / INDEX}: shard row counts do not add up to count {self.count}")

    @property
    def meta(self) -> dict[str, Any]:
        """What made the recording (game, environment settings, policy, seed)."""
        return self.index.get("meta", {})

    def __len__(self) -> int:
        return self.count

    def shard(self, k: int) -> TransitionBatch:
        """Shard ``k`` alone, validated (its order against the shard before is checked by :meth:`batches`)."""
        entry = self.shards[k]
        return _load_shard(self.directory / entry["file"], entry, self.feature_size, self.verify)

    def batches(self) -> Iterator[TransitionBatch]:
        """One :class:`TransitionBatch` per shard, in recorded order."""
        previous = None
        for entry in self.shards:
            path = self.directory / entry["file"]
            batch = _load_shard(path, entry, self.feature_size, self.verify)
            _check_order(batch, previous, path)
            if len(batch):
                previous = (
                    int(batch.episodes[-1]),
                    int(batch.steps[-1]),
                    bool(batch.terminals[-1] | batch.truncated[-1]),
                )
            yield batch

    def check(self, rows: int) -> None:
        """Validate every shard holding the first ``rows`` transitions, keeping none of them in memory.

        For a command that must refuse a corrupt recording before it writes anything: the shards
        are read again when used, so this costs one extra read of them.

        Raises:
          FileNotFoundError, ShardError: as :meth:`batches`, for the first bad shard.
        """
        held = 0
        for batch in self.batches():
            held += len(batch)
            if held >= rows:
                return

    def __iter__(self) -> Iterator[Transition]:
        """Row by row (for a consumer that takes one transition at a time, like the ROS bridge)."""
        for b in self.batches():
            for i in range(len(b)):
                yield Transition(
                    b.features[i],
                    float(b.cumulants[i]),
                    bool(b.terminals[i]),
                    bool(b.truncated[i]),
                    int(b.episodes[i]),
                    int(b.steps[i]),
                    float(b.clipped_cumulants[i]),
                )

    def read_all(self) -> TransitionBatch:
        """The whole recording in memory, as one batch."""
        parts = list(self.batches())
        if not parts:
            return _empty(self.feature_size)
        return TransitionBatch(0, *(np.concatenate([getattr(p, name) for p in parts]) for name, _ in COLUMNS))


def _empty(feature_size: int) -> TransitionBatch:
    return TransitionBatch(0, *(np.zeros((0, feature_size) if n == "features" else (0,), dtype=d) for n, d in COLUMNS))


def read_transitions(directory: str | os.PathLike, *, feature_size: int | None = None) -> TransitionBatch:
    """Every transition of a recording, validated (see :class:`ShardReader`)."""
    return ShardReader(directory, feature_size=feature_size).read_all()


class ShardWriter:
    """Appends transitions in order and commits them (with the caller's resume state) atomically.

    Opening a directory that already holds a recording continues it: ``meta`` must equal
    the recording's, the last (partial) shard is read back into the buffer, and
    :attr:`resume` returns the state committed with it. The caller appends rows and calls
    :meth:`commit` whenever :attr:`shard_full` is true (and at the end); rows appended
    after the last commit are lost in a crash, and the resume state rolls back with them.

    Args:
      directory: where the recording lives (created if needed).
      feature_size: length of φ.
      shard_size: rows per shard file.
      meta: JSON-able description of what makes the rows; must match on resume.
    """

    def __init__(
        self, directory: str | os.PathLike, *, feature_size: int, shard_size: int = 10_000, meta: Mapping[str, Any]
    ):
        if feature_size < 1 or shard_size < 1:
            raise ValueError(f"feature_size and shard_size must be >= 1; got {feature_size}, {shard_size}")
        self.directory = pathlib.Path(directory)
        self.feature_size = int(feature_size)
        self.shard_size = int(shard_size)
        self.meta = json.loads(json.dumps(dict(meta)))
        self._buffer = {
            name: np.zeros((shard_size, feature_size) if name == "features" else (shard_size,), dtype=dtype)
            for name, dtype in COLUMNS
        }
        self._buffered = 0
        self._shards: list[dict[str, Any]] = []
        self._committed = 0  # rows in complete shards
        self.resume: dict[str, Any] | None = None
        if (self.directory / INDEX).exists():
            self._open_existing()

    def _open_existing(self) -> None:
        index = _read_index(self.directory)
        where = self.directory / INDEX
        if index["feature_size"] != self.feature_size or index["shard_size"] != self.shard_size:
            raise ShardError(
                f"{where}: recorded with feature_size {index['feature_size']} and shard_size {index['shard_size']}; "
                f"asked for {self.feature_size} and {self.shard_size}"
            )
        try:
            check_same_config(where, index.get("meta", {}), self.meta)
        except ValueError as exc:
            raise ShardError(f"cannot continue this recording: {exc}") from None
        reader = ShardReader(self.directory, feature_size=self.feature_size)
        self._shards = list(index["shards"])
        self.resume = index.get("resume")
        # The rows appended now continue the listed ones: a shard that is gone or cut short would
        # leave a recording that is broken in the middle, and an index that claims it whole.
        # Dropping it cannot repair that (the resume state is the last commit's), so it is refused.
        for entry in self._shards:
            _check_shard_whole(self.directory / entry["file"], entry)
        if self._shards and int(self._shards[-1]["count"]) < self.shard_size:
            last = reader.shard(len(self._shards) - 1)  # validated before rows are appended to it
            self._shards.pop()
            self._buffered = len(last)
            for name, _ in COLUMNS:
                self._buffer[name][: self._buffered] = getattr(last, name)
        self._committed = sum(int(s["count"]) for s in self._shards)

    @property
    def count(self) -> int:
        """Rows appended so far (committed or not)."""
        return self._committed + self._buffered

    @property
    def shard_full(self) -> bool:
        return self._buffered == self.shard_size

    def append(
        self,
        *,
        features,
        cumulant: float,
        terminal: bool,
        truncated: bool,
        episode: int,
        step: int,
        clipped_cumulant: float | None = None,
    ) -> None:
        """Buffer one row. Raises ValueError (nothing changed) on a bad row or a full, uncommitted shard.

        Args:
          cumulant: the reward as the game scores it.
          clipped_cumulant: the reward the agent learns from; default Dopamine's, ``clip_reward(cumulant)``.
        """
        if self.shard_full:
            raise RuntimeError("the shard is full: commit() before appending more rows")
        phi = np.asarray(features, dtype=np.float32)
        if phi.shape != (self.feature_size,):
            raise ValueError(f"features must have shape ({self.feature_size},); got {phi.shape}")
        clipped = clip_reward(cumulant) if clipped_cumulant is None else clipped_cumulant
        if not (np.isfinite(phi).all() and np.isfinite(cumulant) and np.isfinite(clipped)):
            raise ValueError(f"features and cumulants must be finite (episode {episode} step {step})")
        i, b = self._buffered, self._buffer
        b["features"][i] = phi
        b["cumulants"][i] = cumulant
        b["clipped_cumulants"][i] = clipped
        b["terminals"][i] = terminal
        b["truncated"][i] = truncated
        b["episodes"][i] = episode
        b["steps"][i] = step
        self._buffered += 1

    def commit(self, resume: Mapping[str, Any] | None = None) -> None:
        """Write the buffered shard and the index (with ``resume``, JSON-able) atomically."""
        self.directory.mkdir(parents=True, exist_ok=True)
        shards = list(self._shards)
        if self._buffered:
            k, rows = len(self._shards), self._buffered
            data = io.BytesIO()
            np.savez(data, **{name: self._buffer[name][:rows] for name, _ in COLUMNS})
            blob = data.getvalue()
            name = _shard_name(k, rows)
            atomic_write(self.directory / name, lambda f: f.write(blob))
            entry = {"file": name, "count": rows, "first": self._committed, "sha256": hashlib.sha256(blob).hexdigest()}
            shards.append(entry)
        index = {
            "format": FORMAT,
            "version": VERSION,
            "feature_size": self.feature_size,
            "shard_size": self.shard_size,
            "count": self.count,
            "columns": [name for name, _ in COLUMNS],
            "shards": shards,
            "meta": self.meta,
            "resume": json.loads(json.dumps(resume)) if resume is not None else None,
        }
        text = json.dumps(index, indent=1)
        atomic_write(self.directory / INDEX, lambda f: f.write(text.encode("utf-8")))
        self.resume = index["resume"]
        if self.shard_full:
            self._shards = shards
            self._committed += self._buffered
            self._buffered = 0
        self._remove_unlisted({s["file"] for s in shards})

    def _remove_unlisted(self, listed: set[str]) -> None:
        """Shard files the index no longer names: earlier partial versions, or a crashed commit's."""
        for path in self.directory.iterdir():
            if _SHARD_NAME.match(path.name) and path.name not in listed:
                path.unlink(missing_ok=True)
