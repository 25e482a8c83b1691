"""Configuration doors, atomic validated checkpoints, and the paper's error summaries."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from gamma_net_core.checkpoint import CheckpointError, load_npz, load_torch, save_npz, save_torch
from gamma_net_core.config import from_mapping, load_config, setting, to_mapping
from gamma_net_core.evaluation import compare, correlation, cumulative_absolute_error


@dataclasses.dataclass(frozen=True)
class Example:
    alpha: float = setting(0.1, "step size", low=0.0, high=1.0)
    tilings: tuple[int, ...] = setting((20, 30), "tilings per group", low=1, high=1000)
    scale: str = setting("both", "sampling scale", choices=("gamma", "tau", "both"))


def test_config_from_yaml_section(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("node:\n  ros__parameters:\n    other: 1\n    learner:\n      alpha: 1\n      tilings: [5]\n")
    config = load_config(Example, path, "node", "learner")
    assert config == Example(alpha=1.0, tilings=(5,))
    assert to_mapping(config) == {"alpha": 1.0, "tilings": [5], "scale": "both"}


@pytest.mark.parametrize(
    "mapping, needle",
    [
        ({"alpha": 2.0}, "Example.alpha must be in [0.0, 1.0]; got 2.0"),
        ({"alhpa": 0.1}, "unknown Example settings ['alhpa']"),
        ({"scale": "log"}, "Example.scale must be one of"),
        ({"tilings": [0]}, "Example.tilings must be in"),
        ({"alpha": "fast"}, "Example.alpha must be float"),
    ],
)
def test_bad_config_names_the_key(mapping, needle):
    with pytest.raises(ValueError) as info:
        from_mapping(Example, mapping, where="x.yaml")
    assert needle in str(info.value) and "x.yaml" in str(info.value)


def test_npz_checkpoint_round_trip_and_refusals(tmp_path):
    path = tmp_path / "ck.npz"
    w = np.arange(5.0)
    save_npz(path, kind="linear", version=1, config={"a": 1}, arrays={"w": w}, meta={"updates": 3})
    config, arrays, meta = load_npz(path, kind="linear", version=1, config={"a": 1})
    np.testing.assert_array_equal(arrays["w"], w)
    assert config == {"a": 1} and meta == {"updates": 3}
    with pytest.raises(CheckpointError, match="holds a 'linear', not a 'neural'"):
        load_npz(path, kind="neural", version=1)
    with pytest.raises(CheckpointError, match="format version 1; this code reads 2"):
        load_npz(path, kind="linear", version=2)
    with pytest.raises(CheckpointError, match="a: file has 1, expected 2"):
        load_npz(path, kind="linear", version=1, config={"a": 2})
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_npz(tmp_path / "junk.npz", kind="linear", version=1)
    with pytest.raises(FileNotFoundError):
        load_npz(tmp_path / "none.npz", kind="linear", version=1)


def test_failed_save_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ck.npz"
    save_npz(path, kind="linear", version=1, config={}, arrays={"w": np.ones(3)})
    before = path.read_bytes()

    def crash_midway(f, **arrays):
        f.write(b"PK half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        save_npz(path, kind="linear", version=1, config={}, arrays={"w": np.zeros(3)})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]


def test_object_arrays_are_refused(tmp_path):
    with pytest.raises(ValueError, match="holds Python objects"):
        save_npz(tmp_path / "x.npz", kind="k", version=1, config={}, arrays={"w": np.array([{}], dtype=object)})
    assert not (tmp_path / "x.npz").exists()


def test_torch_checkpoint_refuses_pickled_objects(tmp_path):
    import torch

    path = tmp_path / "net.pt"
    save_torch(path, {"w": torch.ones(2), "step": 4})
    state = load_torch(path)
    assert state["step"] == 4 and torch.equal(state["w"], torch.ones(2))

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    torch.save({"x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_torch(tmp_path / "evil.pt")


def test_compare_normalizes_per_tau_by_the_largest_mean():
    errors = {"a": np.array([[1.0, 10.0], [3.0, 10.0]]), "b": np.array([[4.0, 5.0], [4.0, 5.0]])}
    c = compare(errors, [1, 100])
    np.testing.assert_allclose(c.mean, [[2.0, 10.0], [4.0, 5.0]])
    np.testing.assert_allclose(c.norm_mean, [[0.5, 1.0], [1.0, 0.5]])
    np.testing.assert_allclose(c.var, [[1.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(c.norm_var, [[1.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(c.bar_mean, [0.75, 0.75])
    assert c.best() == "b"  # tie on the mean bar, lower variance


def test_correlation_and_cumulative_error():
    t = np.array([1.0, 2.0, 3.0, 4.0])
    assert correlation(2 * t + 1, t) == pytest.approx(1.0)
    assert correlation(-t, t) == pytest.approx(-1.0)
    assert np.isnan(correlation(np.ones(4), t))
    assert cumulative_absolute_error(t + 0.5, t) == pytest.approx(2.0)
