"""`gamma-net warmup` (what `make setup` runs) leaves a compiled kernel in numba's cache for every kernel nodes use.

The warm-up runs in a process of its own, in the cache this checkout uses (``__pycache__`` beside each
source, which `make setup`'s warm-up filled): every kernel the nodes call must have been called by it
(found in the cache, or compiled and written there), with caching on and its index file on disk, so on
an empty cache, as on a fresh install, the same run writes it. Compiling every kernel into an empty
cache (``NUMBA_CACHE_DIR`` a new folder) took 44 CPU s for the same claim; a compile into an empty
cache is test_node_start.py's cold start, and numba names each cached kernel
``<module>.<function>-<line>.py311.nbi``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from waiting import bound

#: Compiling every kernel, when the cache is not yet warm: 39 s on the loaded 2-core machine, far more beside builds
#: (scaled); loading them from a warm cache takes a few seconds.
WARMUP_S = 600.0
# One compiling thread: it shares the machine with other tests, and times nothing.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(bound(WARMUP_S + 60))]
#: (module, function) of the kernels the predictor, horde and neural_predictor nodes and `arm train` call;
#: inline="always" helpers are compiled into these.
KERNELS = [
    ("gamma_net_core.linear.kernels", "learn_one"),
    ("gamma_net_core.linear.kernels", "predict_many"),
    ("gamma_net_core.linear.kernels", "learn_many"),
    ("gamma_net_core.horde.kernels", "constant_step_runs"),
    ("gamma_net_core.horde.kernels", "autostep_step"),
    ("gamma_net_core.horde.kernels", "predict_runs"),
    ("gamma_net_core.horde.online_error", "_observe"),
    ("gamma_net_core.horde.gradient_td_kernels", "tdc_step"),  # off-policy questions
    ("gamma_net_core.horde.kernels", "predict"),  # their secondary weights, which RUPEE reads
    ("gamma_net_core.linear.lambda_return", "learn_many_lambda_return"),  # a predictor with lam > 0
    ("gamma_net_core.neural.sum_tree", "_set"),
    ("gamma_net_core.neural.sum_tree", "_stratified"),
    ("gamma_net_core.neural.replay", "_assemble"),
    ("gamma_net_core.tilecoding", "_active_many"),
    ("gamma_net_core.returns", "_backward"),
]
#: Runs the warm-up as `gamma-net warmup` does, then says what became of each kernel, one JSON line.
PROBE = """
import importlib, json, pathlib, sys
from gamma_net_core.cli import main
main(["warmup", "--json", sys.argv[1]])
report = {}
for module, name in json.loads(sys.argv[2]):
    kernel = getattr(importlib.import_module(module), name)
    index = getattr(getattr(kernel._cache, "_cache_file", None), "_index_path", None)
    report[f"{module}.{name}"] = {
        "caching": type(kernel._cache).__name__,
        "loaded": sum(kernel.stats.cache_hits.values()),
        "compiled": sum(kernel.stats.cache_misses.values()),
        "index": bool(index) and pathlib.Path(index).is_file(),
    }
print(json.dumps(report))
"""


def test_warmup_calls_and_caches_every_kernel_the_nodes_use(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "warmup.json"), json.dumps(KERNELS)],
        capture_output=True,
        text=True,
        timeout=bound(WARMUP_S),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    for kernel, seen in report.items():
        assert seen["caching"] == "FunctionCache", (kernel, seen)  # cache=True: a fresh install's warm-up writes it
        assert seen["loaded"] + seen["compiled"] > 0, (kernel, seen)  # the warm-up called it
        assert seen["index"], (kernel, seen)  # and it is on disk, found there or written now
    data = json.loads((tmp_path / "warmup.json").read_text())["data"]
    assert data["cache_dir"], data


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
