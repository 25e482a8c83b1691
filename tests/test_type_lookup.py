"""A node's Fast DDS participant has no TypeLookup service: nothing of it to race when the node ends at once.

Fast DDS 3.2 deletes the service's reply writer before it stops the thread that answers other
participants' type requests; a node refused at start crashed there now and then (issue #39). The
nodes start Fast DDS with type propagation disabled, unless the user configures Fast DDS.
"""

from __future__ import annotations

import pathlib

import pytest
from waiting import bound, wait_until

from gamma_net_ros.node_main import NO_TYPE_LOOKUP_PROFILE, without_type_lookup
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros


def _threads(pid: int) -> list[str]:
    names = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # a thread that ended meanwhile
            pass
    return names


def test_a_node_process_runs_fast_dds_without_the_type_lookup_threads(tmp_path):
    log = tmp_path / "teleop.log"
    with NodeProcess(node_command("gamma_net_ros.teleop"), log_path=log) as node:
        pid = node.process.pid
        # Built (its line logged): its participant was enabled before, with whatever services it has.
        assert wait_until(lambda: "Joy axes" in log.read_text(), 60.0), log.read_text()
        threads = _threads(pid)
        assert "dds.ev.0" in threads, threads  # Fast DDS names its threads "dds.*"
        assert not [name for name in threads if name.startswith("dds.tls")], threads
        assert node.stop(timeout=bound(30.0)) == 0, log.read_text()


def test_the_profile_is_set_only_where_the_user_has_not_configured_fast_dds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}
    path = without_type_lookup(env, folder=tmp_path / "profiles")
    assert env["FASTDDS_DEFAULT_PROFILES_FILE"] == path
    assert pathlib.Path(path).read_text() == NO_TYPE_LOOKUP_PROFILE
    assert "fastdds.type_propagation</name><value>disabled" in NO_TYPE_LOOKUP_PROFILE
    assert without_type_lookup({}, folder=tmp_path / "profiles") == path  # Fast DDS is Kilted's default
    for own in ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE", "RMW_FASTRTPS_USE_QOS_FROM_XML"):
        env = {own: "mine"}
        assert without_type_lookup(env, folder=tmp_path / "profiles") is None and env == {own: "mine"}
    env = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    assert without_type_lookup(env, folder=tmp_path / "profiles") is None and "FASTDDS_DEFAULT_PROFILES_FILE" not in env
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # others could put their own profile here
    assert without_type_lookup({}, folder=shared) is None
    (tmp_path / "DEFAULT_FASTDDS_PROFILES.xml").write_text("<dds/>")  # Fast DDS reads it from the working directory
    assert without_type_lookup({}, folder=tmp_path / "profiles") is None
