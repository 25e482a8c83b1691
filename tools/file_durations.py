"""Write tests/durations.json, each test file's seconds, from a run's JUnit XML report.

tests/conftest.py orders the files longest first by it, so `make test`'s workers never end
with one of them alone in a long file. Refresh it after a whole run on a quiet machine:

    make test PYTEST_ARGS=--junitxml=build/junit.xml
    python tools/file_durations.py build/junit.xml

A file's seconds are the sum of its tests' (setup, call and teardown, module fixtures included),
less the time each waited for a `serial` test to end (the conftest's `serial_lock_wait_s`).
"""

from __future__ import annotations

import collections
import datetime
import json
import pathlib
import sys
import xml.etree.ElementTree as ElementTree

REPO = pathlib.Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "durations.json"


def test_file(classname: str) -> str:
    """The test file a JUnit classname (``tests.test_x`` or ``tests.test_x.TestClass``) names."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (REPO / path).is_file():
            return path
    raise ValueError(f"classname {classname!r} names no test file under {REPO}")


def file_seconds(junit_xml: str | pathlib.Path) -> dict[str, float]:
    """Each test file's seconds in a JUnit XML report, longest first."""
    seconds: dict[str, float] = collections.defaultdict(float)
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        waited = sum(float(p.get("value")) for p in case.iter("property") if p.get("name") == "serial_lock_wait_s")
        seconds[test_file(case.get("classname"))] += max(0.0, float(case.get("time", 0.0)) - waited)
    return {name: round(s, 1) for name, s in sorted(seconds.items(), key=lambda kv: -kv[1])}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/file_durations.py JUNIT_XML", file=sys.stderr)
        return 2
    seconds = file_seconds(argv[0])
    document = {
        "measured": datetime.date.today().isoformat(),
        "seconds": seconds,
    }
    OUT.write_text(json.dumps(document, indent=1) + "\n")
    print(f"{OUT.relative_to(REPO)}: {len(seconds)} files, {sum(seconds.values()):.0f} s of tests")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
