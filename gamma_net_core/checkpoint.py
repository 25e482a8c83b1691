"""Checkpoints: atomic saves and validated loads, never arbitrary pickle.

Two formats, one discipline:
- NumPy learners (linear Γ-nets, tile coders): an ``.npz`` archive whose arrays are the
  state and whose ``__header__`` entry is UTF-8 JSON: format name, kind (what wrote it),
  version, the configuration it was made with, and scalar metadata. Loaded with
  ``allow_pickle=False``.
- Torch learners: ``torch.save`` of a dict of tensors and plain values, loaded with
  ``weights_only=True`` (see :func:`save_torch` / :func:`load_torch`).

A save writes a temporary file beside the target, fsyncs it, then renames it over the
target, so a crash at any moment leaves either the old file or the new one, whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import pickle
import re
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

FORMAT = "gamma_net_ros.checkpoint"
HEADER_KEY = "__header__"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: not one of ours, another kind, version or configuration."""


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> pathlib.Path:
    """Call ``write(file)`` on a temporary file beside ``path``, then rename it over ``path``.

    Returns:
      The final path. On any error the temporary file is removed and ``path`` is untouched.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    # The rename is durable only once the directory entry is on disk.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def check_writable(path: str | os.PathLike, *, name: str = "checkpoint_path") -> pathlib.Path:
    """Refuse a checkpoint path that :func:`atomic_write` could not write, before any learning starts.

    A learner that finds out at its first save (minutes in) has learned for nothing. The folder
    (or, where it does not exist yet, the nearest folder above it, where it would be made) is
    probed with a temporary file that is removed at once; nothing else is made.

    Args:
      path: where the checkpoint will be written.
      name: the setting that gave ``path``, named in the refusal.

    Returns:
      ``path`` as a Path.

    Raises:
      CheckpointError: ``path`` is a folder, or a file stands where a folder of it must be made.
      OSError: the folder cannot be written (its message names ``path`` and the reason).
    """
    path = pathlib.Path(path)
    if path.is_dir():
        raise CheckpointError(f"{name} {path} is a folder; it must name a file")
    base = path.parent.absolute()
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise CheckpointError(f"{name} {path}: cannot make its folder, {base} is a file")
    try:
        fd, probe = tempfile.mkstemp(dir=base, prefix=f".{path.name}.", suffix=".probe")
    except OSError as exc:
        raise OSError(f"{name} {path}: cannot write in {base} ({exc.strerror})") from None
    os.close(fd)
    os.unlink(probe)
    return path


def save_npz(
    path: str | os.PathLike,
    *,
    kind: str,
    version: int,
    config: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any] | None = None,
) -> pathlib.Path:
    """Atomically save NumPy state with a JSON header (see the module docstring)."""
    if HEADER_KEY in arrays:
        raise ValueError(f"array name {HEADER_KEY!r} is reserved")
    header = {"format": FORMAT, "kind": kind, "version": int(version), "config": dict(config), "meta": dict(meta or {})}
    blob = np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    payload = {HEADER_KEY: blob, **{k: np.asarray(v) for k, v in arrays.items()}}
    for name, value in payload.items():
        if value.dtype.hasobject:
            raise ValueError(f"array {name!r} holds Python objects; checkpoints store plain numbers only")
    return atomic_write(path, lambda f: np.savez(f, **payload))


def load_npz(
    path: str | os.PathLike,
    *,
    kind: str,
    version: int,
    config: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    """Load and validate a checkpoint written by :func:`save_npz`.

    Args:
      kind, version: what the caller can read; anything else is refused.
      config: if given, the checkpoint's configuration must equal it (a learner of
        another shape must never be resumed silently).

    Returns:
      (config, arrays, meta) from the file.

    Raises:
      FileNotFoundError: no such file.
      CheckpointError: not a checkpoint, another kind or version, or another configuration.
    """
    path = _existing(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if HEADER_KEY not in archive.files:
                raise CheckpointError(f"{path} is not a gamma_net_ros checkpoint (no header)")
            header = json.loads(archive[HEADER_KEY].tobytes().decode("utf-8"))
            arrays = {k: archive[k] for k in archive.files if k != HEADER_KEY}
    except CheckpointError:
        raise
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError) as exc:
        # numpy's refusal of pickled data advises loading it unsafely: never, for a checkpoint.
        reason = "not an .npz archive of arrays (pickled objects are never loaded)" if "pickle" in str(exc) else exc
        raise CheckpointError(f"{path} is not a readable checkpoint: {reason}") from None
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a gamma_net_ros checkpoint (format {header.get('format')!r})")
    if header.get("kind") != kind:
        raise CheckpointError(f"{path} holds a {header.get('kind')!r}, not a {kind!r}")
    if header.get("version") != version:
        raise CheckpointError(f"{path} is {kind} format version {header.get('version')}; this code reads {version}")
    if config is not None:
        check_same_config(path, header["config"], config)
    return header["config"], arrays, header.get("meta", {})


def _existing(path: str | os.PathLike) -> pathlib.Path:
    """``path``, a non-empty file: FileNotFoundError or CheckpointError (one line naming it) otherwise."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.stat().st_size == 0:
        # Saves are atomic, so no save of ours left it so: a copy or a disk that failed, or a file made by hand.
        raise CheckpointError(f"{path} is empty (0 bytes): not a checkpoint")
    return path


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def check_same_config(path, saved: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Raise CheckpointError listing, in one line, every setting (nested ones as ``group.name``) that differs."""
    saved = _flatten(json.loads(json.dumps(dict(saved))))
    expected = _flatten(json.loads(json.dumps(dict(expected))))
    missing = "<missing>"
    diffs = [
        f"{k}: file has {saved.get(k, missing)!r}, expected {expected.get(k, missing)!r}"
        for k in sorted(set(saved) | set(expected))
        if saved.get(k, missing) != expected.get(k, missing)
    ]
    if diffs:
        raise CheckpointError(f"{path} was made with another configuration: {'; '.join(diffs)}")


def save_torch(path: str | os.PathLike, state: Mapping[str, Any]) -> pathlib.Path:
    """Atomically ``torch.save`` a dict of tensors and plain values (loadable with weights_only)."""
    import torch

    return atomic_write(path, lambda f: torch.save(dict(state), f))


def _unpickling_reason(exc: Exception) -> str:
    """torch's reason for refusing a file, in one line, without its advice to load it unsafely
    (turning weights_only off would run whatever code the file holds)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    kept = [line for line in lines if not re.search(r"weights_only|trusted source|documentation of torch.load", line)]
    return " ".join(kept) or "objects of a type that is not allowed"


def load_torch(path: str | os.PathLike, *, map_location: Any = "cpu") -> dict[str, Any]:
    """Load a :func:`save_torch` file with ``weights_only=True``: no arbitrary code runs."""
    import torch

    path = _existing(path)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:  # not only tensors and plain values, or no pickle at all
        raise CheckpointError(f"{path} is not a readable checkpoint: {_unpickling_reason(exc)}") from None
    except Exception as exc:  # torch raises many types for a corrupt file
        raise CheckpointError(f"{path} is not a readable checkpoint: {type(exc).__name__}: {exc}") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} does not hold a checkpoint dict (got {type(state).__name__})")
    return state
