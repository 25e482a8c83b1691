"""Named interfaces: no module uses another's private names, no kernel bundle is read by position.

A private name (``_x``) is its module's own: what another module needs is public and documented, so
renaming or changing a private helper never breaks a distant caller. The numba kernels take named
tuples (the tile coder's :class:`~gamma_net_core.tilecoding.Tiles`, each learner's scratch and work),
so adding a field cannot shift the meaning of an index without an error.
"""

from __future__ import annotations

import ast
import pathlib
import re

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("gamma_net_core", "gamma_net_ros")
#: Where the kernel bundles live and travel: the tile coder, the linear and Horde learners, their warm-up and benches.
KERNEL_SOURCES = (
    "gamma_net_core/tilecoding.py",
    "gamma_net_core/linear",
    "gamma_net_core/horde",
    "gamma_net_core/warmup.py",
    "gamma_net_studies/bench/linear.py",
    "gamma_net_studies/bench/horde.py",
)
#: The names kernel bundles go by (as variables, attributes, or the coder's ``kernel_args``).
BUNDLES = (
    "tiles|coding|scratch|work|dense|traces|autostep|groups|probes|recording|schedule|columns|anchors|waiting|scores"
    "|kernel_args|lambda_work|autostep_work|autostep_state"
)
#: ``tiles[7]``, ``self._scratch[5]``, ``traces.kernel_args[3]``, ``work[-1]``: a bundle read by position.
INDEXED = re.compile(rf"(?<![\w])_?(?:{BUNDLES})\s*\[\s*-?\d+\s*[\]:,]")


#: Public API of every named tuple despite the underscore.
NAMEDTUPLE_API = {"_fields", "_field_defaults", "_replace", "_asdict", "_make"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def _sources(*roots: str) -> list[pathlib.Path]:
    out = []
    for root in roots:
        path = REPO / root
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def _private_reaches(path: pathlib.Path, root: pathlib.Path = REPO) -> list[str]:
    """``from m import _x``, ``import m._x`` and ``m._x`` on an imported project module, in one file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = path.relative_to(root)
    found = []
    modules = {}  # local name -> project module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__":
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{where}:{node.lineno} from {node.module} import {alias.name}")
                elif node.module.split(".")[0] in PACKAGES:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(_private(part) for part in alias.name.split(".")):
                    found.append(f"{where}:{node.lineno} import {alias.name}")
                elif alias.name.split(".")[0] in PACKAGES and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            found.append(f"{where}:{node.lineno} {node.value.id}._{node.attr.lstrip('_')} ({modules[node.value.id]})")
    return found


def _code_lines(path: pathlib.Path):
    """(line number, text) of the code, comments and docstrings left out (they may show an old index)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if number not in docstrings:
            yield number, line.split("#", 1)[0]


def test_no_module_imports_another_modules_private_names():
    found = [hit for package in PACKAGES for path in _sources(package) for hit in _private_reaches(path)]
    assert not found, "private names used across modules (make them public and document them):\n" + "\n".join(found)


def test_the_private_name_check_catches_each_form(tmp_path):
    # The scanner itself: each way of reaching into another module is caught, public use is not.
    path = tmp_path / "gamma_net_core" / "example.py"
    path.parent.mkdir()
    path.write_text(
        "from gamma_net_core.linear.kernels import _alpha, alpha_at\n"
        "import gamma_net_core.linear.kernels as k\n"
        "from gamma_net_core.horde import kernels\n"
        "k._learn_one(1)\nkernels._build(2)\nkernels.make_scratch(3)\n"
    )
    found = _private_reaches(path, tmp_path)
    assert [hit.split(" ", 1)[1] for hit in found] == [
        "from gamma_net_core.linear.kernels import _alpha",
        "k._learn_one (gamma_net_core.linear.kernels)",
        "kernels._build (gamma_net_core.horde.kernels)",
    ]


def test_no_kernel_bundle_is_read_by_position():
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in _sources(*KERNEL_SOURCES)
        for number, line in _code_lines(path)
        if INDEXED.search(line)
    ]
    assert not found, "kernel bundles read by position (use the field's name):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line", ["tiles[7]", "n = self._scratch[9][:, :k]", "traces.kernel_args[3]", "lo = work[0:2]", "dense[ 5 ]"]
)
def test_the_bundle_index_pattern_catches_positional_reads(line):
    assert INDEXED.search(line)


@pytest.mark.parametrize("line", ["tiles.memory_size", "scratch.idx_t[:K]", "keys_tiles[3]", "idx_t[k, t]"])
def test_the_bundle_index_pattern_leaves_named_reads(line):
    assert not INDEXED.search(line)


def test_every_bundle_the_learners_hand_the_kernels_is_a_named_tuple():
    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.questions import AdaptationConfig
    from gamma_net_core.linear import GammaNetConfig, LinearGammaNet
    from gamma_net_core.linear.kernels import traced_work

    def named(bundle) -> bool:
        return isinstance(bundle, tuple) and hasattr(type(bundle), "_fields") and bool(type(bundle).__annotations__)

    config = GammaNetConfig(lam=0.5, lambda_view="backward", bias_unit="scaled")
    horde = HordeLearner(config, names=["a", "b"], rng=np.random.default_rng(0), trace_groups=[0, 1])
    autostep = HordeLearner(
        GammaNetConfig(bias_unit="scaled"),
        names=["a"],
        adaptation=AdaptationConfig(method="autostep"),
        rng=np.random.default_rng(0),
    )
    net = LinearGammaNet(config, rng=np.random.default_rng(0))
    bundles = {
        "TileCoder.kernel_args": net.coder.kernel_args,
        "LinearGammaNet coding": net._coding,
        "traced_work": traced_work(8, 2),
        "Horde coding": horde._coding,
        "Horde scratch": horde._scratch,
        "Horde trace groups": horde._groups,
        "Horde lambda work": horde._lambda_work,
        "lambda-return window": LinearGammaNet(
            GammaNetConfig(lam=0.5), rng=np.random.default_rng(1)
        )._window.kernel_args,
        "Autostep state": autostep._autostep_state,
        "Autostep work": autostep._autostep_work,
    }
    unnamed = [name for name, bundle in bundles.items() if not named(bundle)]
    assert not unnamed
    # The Horde builds from the linear package's public parts, not from a single-question learner.
    assert not [k for k, v in vars(horde).items() if isinstance(v, LinearGammaNet)]


def test_the_plain_coding_the_kernels_take_names_every_field_back():
    # Kernels take Coding.plain() (a plain tuple dispatches faster) and name it again on entry: a field
    # added to Coding but not to both sides, or in another order, comes back under the wrong name here.
    from gamma_net_core.linear import GammaNetConfig, LinearGammaNet
    from gamma_net_core.linear.kernels import named_coding

    coding = LinearGammaNet(GammaNetConfig(tau_scale=7.0), rng=np.random.default_rng(0))._coding
    again = named_coding.py_func(coding.plain())
    assert type(again) is type(coding) and type(again.tiles) is type(coding.tiles)
    for name in type(coding)._fields:
        if name != "tiles":
            assert getattr(again, name) == getattr(coding, name), name
    for name in type(coding.tiles)._fields:
        assert getattr(again.tiles, name) is getattr(coding.tiles, name), name
