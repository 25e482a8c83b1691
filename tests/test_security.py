"""DDS-Security: the SROS2 policy shipped in config/security, and nodes asked for security where there is none.

The policy validates against sros2's schema, and ``ros2 security generate_artifacts`` makes a
keystore with an enclave (key, certificate, signed permissions) for every ``--enclave`` the launch
files pass. The Fast DDS of the PyPI wheels has no DDS-Security: a node started with
``ROS_SECURITY_ENABLE=true`` there refuses in one line, with or without a keystore.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest
from waiting import bound

from gamma_net_ros.node_main import security_refusal
from gamma_net_ros.processes import node_command

ROOT = pathlib.Path(__file__).resolve().parent.parent
POLICY = ROOT / "config" / "security" / "policy.xml"


def _launch_enclaves() -> set[str]:
    return {
        m for f in (ROOT / "launch").glob("*.launch.py") for m in re.findall(r'"--enclave", "([^"]+)"', f.read_text())
    }


def test_the_policy_validates_against_sros2s_schema_and_covers_every_launched_node():
    etree = pytest.importorskip("lxml.etree")
    sros2 = pytest.importorskip("sros2.policy")
    schema = etree.XMLSchema(etree.parse(str(pathlib.Path(sros2.__file__).parent / "schemas" / "policy.xsd")))
    policy = etree.parse(str(POLICY))
    assert schema.validate(policy), schema.error_log
    enclaves = {e.get("path") for e in policy.iter("enclave")}
    assert _launch_enclaves() and _launch_enclaves() <= enclaves, _launch_enclaves() - enclaves


def _permitted(permissions: pathlib.Path, rule: str) -> set[str]:
    """The DDS topics an enclave's permissions.xml allows to ``rule`` (publish or subscribe)."""
    from lxml import etree

    tree = etree.parse(str(permissions))
    return {t.text for block in tree.iter(rule) for t in block.iter("topic")}


def test_generate_artifacts_makes_a_keystore_and_an_enclave_per_node(tmp_path):
    pytest.importorskip("sros2")
    keystore = tmp_path / "keystore"
    done = subprocess.run(
        ["ros2", "security", "generate_artifacts", "-k", str(keystore), "-p", str(POLICY)],
        capture_output=True,
        text=True,
        timeout=bound(300.0),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("public/identity_ca.cert.pem", "public/permissions_ca.cert.pem", "enclaves/governance.p7s"):
        assert (keystore / name).is_file(), name
    for enclave in _launch_enclaves():
        folder = keystore / "enclaves" / enclave.lstrip("/")
        for name in ("key.pem", "cert.pem", "permissions.p7s", "permissions.xml", "governance.p7s"):
            assert (folder / name).is_file(), (enclave, name)
    # Under reflex.launch.py only the reflex may command the driver; teleop speaks to the reflex.
    reflex = keystore / "enclaves" / "gamma_net" / "reflex"
    assert "rt/joint_commands" in _permitted(reflex / "reflex" / "permissions.xml", "publish")
    assert "rt/joint_commands" not in _permitted(reflex / "teleop" / "permissions.xml", "publish")
    assert "rt/joint_commands_in" in _permitted(reflex / "teleop" / "permissions.xml", "publish")
    assert "rt/joint_commands" in _permitted(reflex / "dynamixel_driver" / "permissions.xml", "subscribe")


@pytest.mark.ros
@pytest.mark.parametrize("keystore", [False, True])
def test_a_node_asked_for_security_on_a_middleware_without_it_refuses_in_one_line(tmp_path, keystore):
    env = dict(os.environ, ROS_SECURITY_ENABLE="true")
    if security_refusal(env) is None:
        pytest.skip("this middleware has DDS-Security")
    command = node_command("gamma_net_ros.reflex.node")
    if keystore:
        pytest.importorskip("sros2")
        store = tmp_path / "keystore"
        for verb in (["create_keystore", str(store)], ["create_enclave", str(store), "/gamma_net/reflex/reflex"]):
            subprocess.run(["ros2", "security", *verb], capture_output=True, check=True, timeout=bound(120.0))
        env.update(ROS_SECURITY_KEYSTORE=str(store), ROS_SECURITY_STRATEGY="Enforce")
        command += ["--enclave", "/gamma_net/reflex/reflex"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=bound(120.0))
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    (line,) = output.strip().splitlines()
    assert "[reflex]" in line and "ROS_SECURITY_ENABLE=true" in line and "no DDS-Security" in line, output
    assert "docs/security.md" in line, output
