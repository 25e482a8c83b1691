"""`gamma-net warmup` (what `make setup` runs) leaves a compiled kernel in numba's cache for every kernel nodes use.

Run on an empty cache (``NUMBA_CACHE_DIR`` a new folder), as on a fresh install; numba names each
cached kernel ``<module>.<function>-<line>.py311.nbi``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from waiting import bound

#: Compiling every kernel into an empty cache: 39 s on the loaded 2-core machine, far more beside builds (scaled).
WARMUP_S = 600.0
# One compiling thread: it shares the machine with other tests, and times nothing.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(bound(WARMUP_S + 60))]
#: (cache folder prefix, module.function) of the kernels the predictor, horde and neural_predictor nodes
#: and `arm train` call; inline="always" helpers are compiled into these.
KERNELS = [
    ("linear", "kernels.learn_one"),
    ("linear", "kernels.predict_many"),
    ("linear", "kernels.learn_many"),
    ("horde", "kernels.constant_step_runs"),
    ("horde", "kernels.autostep_step"),
    ("horde", "kernels.predict_runs"),
    ("horde", "online_error._observe"),
    ("neural", "sum_tree._set"),
    ("neural", "sum_tree._stratified"),
    ("neural", "replay._assemble"),
    ("gamma_net_core", "tilecoding._active_many"),
    ("gamma_net_core", "returns._backward"),
]


def test_warmup_fills_an_empty_cache_with_every_kernel_the_nodes_use(tmp_path):
    cache = tmp_path / "numba"
    done = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "warmup", "--json", str(tmp_path / "warmup.json")],
        env=dict(os.environ, NUMBA_CACHE_DIR=str(cache)),
        capture_output=True,
        text=True,
        timeout=bound(WARMUP_S),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cached = {
        f"{folder.name.rsplit('_', 1)[0]}:{index.name.split('-')[0]}"
        for folder in cache.iterdir()
        for index in folder.glob("*.nbi")
    }
    missing = [f"{prefix}:{kernel}" for prefix, kernel in KERNELS if f"{prefix}:{kernel}" not in cached]
    assert not missing, (missing, sorted(cached))
    data = json.loads((tmp_path / "warmup.json").read_text())["data"]
    assert str(cache) in data["cache_dir"]


@pytest.mark.parametrize("view", ["forward", "backward"])
def test_offline_warmup_with_td_lambda_compiles_the_kernel_of_its_view(view):
    """With lam > 0 `arm train` learns a recording through linear/lambda_return.py (the forward view) or
    linear/laddered.py (the backward view): the offline warm-up takes the same door."""
    import dataclasses

    from gamma_net_core.config import load_config
    from gamma_net_core.linear import GammaNetConfig
    from gamma_net_core.linear.laddered import learn_many_laddered
    from gamma_net_core.linear.lambda_return import learn_many_lambda_return
    from gamma_net_core.paths import config_file
    from gamma_net_core.timescales import TimescaleSampling
    from gamma_net_core.warmup import warm_offline

    arm = config_file("arm")
    learner = dataclasses.replace(load_config(GammaNetConfig, arm, "predictor", "learner"), lam=0.9, lambda_view=view)
    kernel = learn_many_lambda_return if view == "forward" else learn_many_laddered
    warm_offline(learner, load_config(TimescaleSampling, arm, "predictor", "timescales"))
    assert kernel.signatures
