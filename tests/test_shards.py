"""Transition shards: written in order, read back identically, resumed, and refused when damaged."""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pytest

from gamma_net_core.data.shards import INDEX, ShardError, ShardReader, ShardWriter, read_transitions
from gamma_net_core.returns import discounted_returns

F = 8  # a small feature size keeps these tests fast; the format does not care


def episodes_of(lengths, *, cut_last: bool = False, seed: int = 0):
    """Rows of consecutive episodes of the given lengths (each terminal, or the last one cut)."""
    rng = np.random.default_rng(seed)
    rows = []
    for e, n in enumerate(lengths):
        for t in range(n):
            last = t == n - 1
            cut = cut_last and e == len(lengths) - 1 and last
            rows.append(
                {
                    "features": rng.normal(size=F).astype(np.float32),
                    "cumulant": float(rng.integers(0, 3)),
                    "terminal": last and not cut,
                    "truncated": cut,
                    "episode": e,
                    "step": t,
                }
            )
    return rows


def write(directory, rows, *, shard_size=4, meta=None):
    writer = ShardWriter(directory, feature_size=F, shard_size=shard_size, meta=meta or {"what": "test"})
    for row in rows:
        writer.append(**row)
        if writer.shard_full:
            writer.commit({"row": writer.count})
    writer.commit({"row": writer.count})
    return writer


def test_rows_read_back_identically_in_order(tmp_path):
    rows = episodes_of([3, 5, 2], cut_last=True)
    write(tmp_path, rows, shard_size=4)
    index = json.loads((tmp_path / INDEX).read_text())
    assert [s["count"] for s in index["shards"]] == [4, 4, 2] and index["count"] == 10
    data = read_transitions(tmp_path, feature_size=F)
    assert data.features.dtype == np.float32 and data.terminals.dtype == np.bool_
    assert np.array_equal(data.features, np.stack([r["features"] for r in rows]))
    assert data.cumulants.tolist() == [r["cumulant"] for r in rows]
    assert data.terminals.tolist() == [r["terminal"] for r in rows]
    assert data.truncated.tolist() == [r["truncated"] for r in rows]
    assert data.episodes.tolist() == [r["episode"] for r in rows]
    assert data.steps.tolist() == [r["step"] for r in rows]
    streamed = list(ShardReader(tmp_path))
    assert [t.step for t in streamed] == data.steps.tolist()
    assert np.array_equal(streamed[7].features, rows[7]["features"])
    batches = list(ShardReader(tmp_path).batches())
    assert [b.first for b in batches] == [0, 4, 8]
    # The rows are in the convention of gamma_net_core.returns: the return stops at each terminal.
    g = discounted_returns(data.cumulants, [0.5], terminals=data.terminals)[:, 0]
    assert g[2] == rows[2]["cumulant"]  # episode 0's last state
    assert g[1] == rows[1]["cumulant"] + 0.5 * rows[2]["cumulant"]


def append_and_commit(directory, rows):
    """Reopen a recording, append ``rows`` (committing full shards and at the end), as the recorder does."""
    writer = ShardWriter(directory, feature_size=F, shard_size=4, meta={"what": "test"})
    for row in rows:
        writer.append(**row)
        if writer.shard_full:
            writer.commit({"row": writer.count})
    writer.commit({"row": writer.count})
    return writer


def test_writing_in_pieces_equals_writing_at_once(tmp_path):
    rows = episodes_of([6, 7])
    write(tmp_path / "once", rows, shard_size=4)
    append_and_commit(tmp_path / "pieces", rows[:3])  # stops inside shard 0
    writer = ShardWriter(tmp_path / "pieces", feature_size=F, shard_size=4, meta={"what": "test"})
    assert writer.count == 3 and writer.resume == {"row": 3}
    append_and_commit(tmp_path / "pieces", rows[3:9])  # stops inside shard 2
    append_and_commit(tmp_path / "pieces", rows[9:])
    once, pieces = read_transitions(tmp_path / "once"), read_transitions(tmp_path / "pieces")
    for name in once._fields:
        assert np.array_equal(getattr(once, name), getattr(pieces, name)), name
    # Same files too: a shard's name and content depend only on its rows; old partial shards are gone.
    names = sorted(p.name for p in (tmp_path / "once").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "pieces").iterdir())
    for name in names:
        if name != INDEX:
            assert (tmp_path / "once" / name).read_bytes() == (tmp_path / "pieces" / name).read_bytes()


def test_uncommitted_rows_are_lost_whole_and_the_directory_stays_readable(tmp_path):
    rows = episodes_of([9])
    writer = write(tmp_path, rows[:5], shard_size=4)
    writer.append(**rows[5])  # appended, never committed: a crash now
    del writer
    assert len(read_transitions(tmp_path)) == 5
    assert ShardWriter(tmp_path, feature_size=F, shard_size=4, meta={"what": "test"}).count == 5


def test_continuing_with_other_settings_is_refused(tmp_path):
    write(tmp_path, episodes_of([3]), meta={"game": "centipede", "seed": 0})
    with pytest.raises(ShardError, match="seed: file has 0, expected 1"):
        ShardWriter(tmp_path, feature_size=F, shard_size=4, meta={"game": "centipede", "seed": 1})
    with pytest.raises(ShardError, match="feature_size 8"):
        ShardWriter(tmp_path, feature_size=512, shard_size=4, meta={"game": "centipede", "seed": 0})


def test_missing_shard_is_named(tmp_path):
    write(tmp_path, episodes_of([10]))
    (tmp_path / "shard-000001-n000004.npz").unlink()
    with pytest.raises(FileNotFoundError, match=r"shard-000001-n000004\.npz"):
        read_transitions(tmp_path)


def test_corrupt_shard_is_named(tmp_path):
    write(tmp_path, episodes_of([10]))
    path = tmp_path / "shard-000002-n000002.npz"
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))
    with pytest.raises(ShardError, match=r"shard-000002-n000002.npz is corrupt"):
        read_transitions(tmp_path)
    # Without the checksum, numpy's own checks still catch a truncated file.
    path.write_bytes(bytes(blob[:100]))
    with pytest.raises(ShardError, match=r"shard-000002-n000002\.npz is corrupt"):
        list(ShardReader(tmp_path, verify=False).batches())


def test_continuing_onto_a_corrupt_last_shard_is_refused(tmp_path):
    write(tmp_path, episodes_of([6]))  # shards of 4 and 2 rows: the writer appends to the second
    path = tmp_path / "shard-000001-n000002.npz"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ShardError, match=r"shard-000001-n000002\.npz is corrupt"):
        ShardWriter(tmp_path, feature_size=F, shard_size=4, meta={"what": "test"})


def test_feature_size_mismatch_is_refused(tmp_path):
    write(tmp_path, episodes_of([3]))
    with pytest.raises(ShardError, match="size 8, the network expects 512"):
        ShardReader(tmp_path, feature_size=512)
    with pytest.raises(ValueError, match=r"shape \(8,\); got \(7,\)"):
        ShardWriter(tmp_path / "b", feature_size=F, meta={}).append(
            features=np.zeros(7), cumulant=0.0, terminal=False, truncated=False, episode=0, step=0
        )


def test_nan_is_refused_when_writing(tmp_path):
    writer = ShardWriter(tmp_path, feature_size=F, meta={})
    bad = np.zeros(F)
    bad[3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        writer.append(features=bad, cumulant=0.0, terminal=False, truncated=False, episode=0, step=0)
    assert writer.count == 0


def test_missing_or_damaged_index_and_rows_out_of_order(tmp_path):
    with pytest.raises(FileNotFoundError, match=INDEX):
        read_transitions(tmp_path)
    (tmp_path / INDEX).write_text("{not json")
    with pytest.raises(ShardError, match=r"index\.json is not a readable index"):
        read_transitions(tmp_path)
    rows = episodes_of([3, 3])
    rows[4]["step"] = 7
    write(tmp_path / "order", rows)
    with pytest.raises(ShardError, match="out of order at row 4"):
        read_transitions(tmp_path / "order")


def test_raw_and_clipped_rewards_are_both_recorded(tmp_path):
    rows = episodes_of([5])
    for row, reward in zip(rows, [0.0, 10.0, -3.0, 0.5, 100.0]):
        row["cumulant"] = reward
    rows[3]["clipped_cumulant"] = 0.25  # a recorder may store its own clipping
    write(tmp_path, rows)
    assert json.loads((tmp_path / INDEX).read_text())["version"] == 2
    data = read_transitions(tmp_path, feature_size=F)
    assert data.cumulants.tolist() == [0.0, 10.0, -3.0, 0.5, 100.0]
    assert data.clipped_cumulants.tolist() == [0.0, 1.0, -1.0, 0.25, 1.0]
    assert [t.clipped_cumulant for t in ShardReader(tmp_path)] == [0.0, 1.0, -1.0, 0.25, 1.0]


def downgrade_to_version_1(directory) -> None:
    """Rewrite a recording as version 1 wrote it: no clipped_cumulants column, index version 1."""
    index = json.loads((directory / INDEX).read_text())
    for entry in index["shards"]:
        with np.load(directory / entry["file"]) as archive:
            arrays = {k: archive[k] for k in archive.files if k != "clipped_cumulants"}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        (directory / entry["file"]).write_bytes(buffer.getvalue())
        entry["sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    index["version"] = 1
    index["columns"] = [c for c in index["columns"] if c != "clipped_cumulants"]
    (directory / INDEX).write_text(json.dumps(index))


def test_a_version_1_recording_stays_readable_and_continues_as_version_2(tmp_path):
    rows = episodes_of([3, 4], seed=2)
    for row in rows:
        row["cumulant"] = row["cumulant"] * 3.0 - 2.0  # -2, 1, 4: some outside [-1, 1]
    write(tmp_path, rows[:6], shard_size=4)
    downgrade_to_version_1(tmp_path)
    with np.load(tmp_path / json.loads((tmp_path / INDEX).read_text())["shards"][0]["file"]) as archive:
        assert "clipped_cumulants" not in archive.files
    old = read_transitions(tmp_path, feature_size=F)
    raw = [r["cumulant"] for r in rows]
    assert old.cumulants.tolist() == raw[:6] and old.clipped_cumulants.tolist() == np.clip(raw[:6], -1, 1).tolist()
    append_and_commit(tmp_path, rows[6:])  # the partial old shard is rewritten with the new column
    assert json.loads((tmp_path / INDEX).read_text())["version"] == 2
    data = read_transitions(tmp_path, feature_size=F)
    assert data.cumulants.tolist() == raw and data.clipped_cumulants.tolist() == np.clip(raw, -1, 1).tolist()
    index = json.loads((tmp_path / INDEX).read_text())
    index["version"] = 3
    (tmp_path / INDEX).write_text(json.dumps(index))
    with pytest.raises(ShardError, match=r"version 3; this code reads versions \[1, 2\]"):
        read_transitions(tmp_path)
