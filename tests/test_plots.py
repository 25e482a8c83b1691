"""Figures are written as real PNGs from real comparisons."""

from __future__ import annotations

import numpy as np

from gamma_net_core.evaluation import compare
from gamma_net_core.plots import compact_png, plot_comparison, plot_predictions

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_comparison_figure(tmp_path):
    rng = np.random.default_rng(0)
    taus = np.array([1, 2, 5, 10, 20, 40, 60, 80, 100.0])
    c = compare({"a": rng.random((3, 9)), "b": rng.random((3, 9))}, taus)
    path = plot_comparison(c, tmp_path / "c.png", title="t", correlation={"a": rng.random((3, 9))}, reference="a")
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_predictions_figure(tmp_path):
    t = np.arange(50)
    returns = np.stack([np.sin(t / 5), np.cos(t / 5)], axis=1)
    path = plot_predictions(t, returns, {"Γ-net": returns + 0.1}, [0.9, 0.99], tmp_path / "p.png", title="t")
    assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 10_000


def test_compact_png_shrinks_a_figure_and_keeps_its_size(tmp_path):
    from PIL import Image

    t = np.arange(300)
    returns = np.stack([np.sin(t / 9), np.cos(t / 13)], axis=1)
    path = plot_predictions(t, returns, {"Γ-net": returns + 0.05}, [0.9, 0.99], tmp_path / "p.png", title="t")
    before = path.stat().st_size
    with Image.open(path) as image:
        shape = image.size
    assert compact_png(path) == path and path.read_bytes()[:8] == PNG_MAGIC
    with Image.open(path) as image:
        assert image.size == shape and image.mode == "P" and len(image.getpalette()) <= 3 * 96
    assert path.stat().st_size < before
