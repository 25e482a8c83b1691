"""A pytest plugin for tests/test_readme_tiers.py: what each tier's ``-m`` expression selects, in one collection.

Collecting the whole suite takes seconds of CPU, and a collection per tier took four times that.
The selection here is pytest's own (``_pytest.mark.deselect_by_mark``, what ``-m`` runs), applied
to a copy of the collected items for each expression, so an expression or a marker name that
``make test PYTEST_ARGS='-m ...'`` would refuse fails this collection too.
"""

from __future__ import annotations

import json
import os

from _pytest.mark import deselect_by_mark

#: Names of the environment variables: the JSON {tier: mark expression} to select with, and the
#: file to write {tier: [node ids]} to.
EXPRESSIONS, SELECTED = "GAMMA_NET_TIER_EXPRESSIONS", "GAMMA_NET_TIER_SELECTED"


def pytest_collection_finish(session):
    """Writes the node ids each tier's expression keeps of the collected items (which stay as collected)."""
    config = session.config
    given = config.option.markexpr
    selected = {}
    try:
        for tier, expression in json.loads(os.environ[EXPRESSIONS]).items():
            items = list(session.items)
            config.option.markexpr = expression
            deselect_by_mark(items, config)
            selected[tier] = [item.nodeid for item in items]
    finally:
        config.option.markexpr = given
    with open(os.environ[SELECTED], "w") as f:
        json.dump(selected, f)
