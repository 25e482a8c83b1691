"""Protocol 2.0 packets, the X-series control table, and the emulated servos, without I/O.

Expected bytes are the worked examples of the ROBOTIS e-manual ("DYNAMIXEL Protocol 2.0",
Instruction Details); the real dynamixel_sdk's CRC and byte stuffing serve as a second oracle.
"""

from __future__ import annotations

import ast
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from dynamixel_sdk import Protocol2PacketHandler

from gamma_net_core.signals.servo import ServoLimits, ServoModel
from gamma_net_ros.hardware import control_table as ct
from gamma_net_ros.hardware import protocol as p
from gamma_net_ros.hardware.emulator import Faults, ServoBank

REPO = pathlib.Path(__file__).resolve().parent.parent


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text)


# (what, packet, the e-manual's bytes)
EMANUAL = [
    ("ping id 1", p.ping(1), "FF FF FD 00 01 03 00 01 19 4E"),
    ("ping broadcast", p.ping(p.BROADCAST_ID), "FF FF FD 00 FE 03 00 01 31 42"),
    ("ping status id 1", p.StatusPacket(1, 0, hexbytes("06 04 26")), "FF FF FD 00 01 07 00 55 00 06 04 26 65 5D"),
    ("ping status id 2", p.StatusPacket(2, 0, hexbytes("06 04 26")), "FF FF FD 00 02 07 00 55 00 06 04 26 6F 6D"),
    ("read present position", p.read(1, 132, 4), "FF FF FD 00 01 07 00 02 84 00 04 00 1D 15"),
    ("read status", p.StatusPacket(1, 0, hexbytes("A6 00 00 00")), "FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0"),
    (
        "write goal position",
        p.write(1, 116, hexbytes("00 02 00 00")),
        "FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89",
    ),
    ("empty status", p.StatusPacket(1), "FF FF FD 00 01 04 00 55 00 A1 0C"),
    (
        "reg write",
        p.InstructionPacket(1, p.Instruction.REG_WRITE, hexbytes("68 00 C8 00 00 00")),
        "FF FF FD 00 01 09 00 04 68 00 C8 00 00 00 AE 8E",
    ),
    ("reboot", p.reboot(1), "FF FF FD 00 01 03 00 08 2F 4E"),
    ("sync read", p.sync_read(132, 4, [1, 2]), "FF FF FD 00 FE 09 00 82 84 00 04 00 01 02 CE FA"),
    (
        "sync read status id 2",
        p.StatusPacket(2, 0, hexbytes("1F 08 00 00")),
        "FF FF FD 00 02 08 00 55 00 1F 08 00 00 BA BE",
    ),
    (
        "sync write",
        p.sync_write(116, 4, {1: hexbytes("96 00 00 00"), 2: hexbytes("AA 00 00 00")}),
        "FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 82 87",
    ),
    (
        "bulk read",
        p.InstructionPacket(p.BROADCAST_ID, p.Instruction.BULK_READ, hexbytes("01 90 00 02 00 02 92 00 01 00")),
        "FF FF FD 00 FE 0D 00 92 01 90 00 02 00 02 92 00 01 00 1A 05",
    ),
]


@pytest.mark.parametrize(("what", "packet", "expected"), EMANUAL, ids=[e[0] for e in EMANUAL])
def test_packets_match_the_emanual_and_decode_back(what, packet, expected):
    frame = packet.encode()
    assert frame == hexbytes(expected)
    assert type(packet).decode(frame) == packet


def test_crc_agrees_with_the_sdk_on_random_data():
    sdk = Protocol2PacketHandler()
    rng = np.random.default_rng(0)
    for size in (1, 7, 64, 300):
        data = rng.integers(0, 256, size).tolist()
        assert p.crc16(data) == sdk.updateCRC(0, data, size)
    assert p.crc16(hexbytes("FF FF FD 00 01 03 00 01")) == 0x4E19


def test_stuffing_inserts_fd_after_the_header_pattern():
    assert p.stuff(hexbytes("55 00 FF FF FD 07")) == hexbytes("55 00 FF FF FD FD 07")
    assert p.stuff(hexbytes("FF FF FD FF FF FD")) == hexbytes("FF FF FD FD FF FF FD FD")
    assert p.unstuff(hexbytes("FF FF FD FD FD")) == hexbytes("FF FF FD FD")
    with pytest.raises(p.PacketError, match="stuffing"):
        p.unstuff(hexbytes("00 FF FF FD 01"))


def test_stuffing_round_trips_and_matches_the_sdk():
    sdk = Protocol2PacketHandler()
    rng = np.random.default_rng(1)
    for _ in range(300):
        # Bytes drawn mostly from FF and FD so header patterns are common.
        params = bytes(rng.choice([0xFF, 0xFD, 0x00, 0x55], size=int(rng.integers(1, 24)), p=[0.45, 0.35, 0.1, 0.1]))
        body = bytes([p.Instruction.WRITE]) + params
        assert p.unstuff(p.stuff(body)) == body
        frame = p.InstructionPacket(3, p.Instruction.WRITE, params).encode()
        # The SDK's own stuffing of the same packet, then its CRC: must give the same frame.
        raw = [*p.HEADER, 3, (len(body) + 2) & 0xFF, (len(body) + 2) >> 8, *body, 0, 0]
        stuffed = sdk.addStuffing(raw)
        length = stuffed[5] | stuffed[6] << 8
        crc = sdk.updateCRC(0, stuffed, length + 5)
        assert frame == bytes(stuffed[: length + 5]) + bytes([crc & 0xFF, crc >> 8])
        assert p.InstructionPacket.decode(frame).params == params
        sdk_unstuffed = sdk.removeStuffing(list(frame))
        assert bytes(sdk_unstuffed[7 : 7 + len(body)]) == body


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ("FF FF FD 00 01 03 00 01 19 4F", "CRC mismatch"),
        ("FF FF FE 00 01 03 00 01 19 4E", "header"),
        ("FF FF FD 00 01 04 00 01 19 4E", "length field"),
        ("FF FF FD 00 01 03", "shorter"),
    ],
)
def test_bad_frames_are_refused_with_a_clear_error(frame, message):
    with pytest.raises(p.PacketError, match=message):
        p.decode(hexbytes(frame))


def test_status_and_instruction_are_not_confused():
    with pytest.raises(p.PacketError, match="status packet"):
        p.InstructionPacket.decode(p.StatusPacket(1).encode())
    with pytest.raises(p.PacketError, match="expected a status packet"):
        p.StatusPacket.decode(p.ping(1).encode())
    with pytest.raises(p.PacketError, match="servo id 253"):
        p.read(253, 0, 1)


def test_frames_are_cut_from_a_noisy_stream_arriving_in_pieces():
    ping, status = p.ping(1).encode(), p.StatusPacket(2, 0, b"\x01\x02").encode()
    stream = b"\x00\xff\x13" + ping + status + ping[:5]
    buffer, frames = bytearray(), []
    for byte in stream:  # one byte at a time, as a serial port may deliver them
        buffer.append(byte)
        while (frame := p.next_frame(buffer)) is not None:
            frames.append(frame)
    assert frames == [ping, status]
    assert bytes(buffer) == ping[:5]


def test_control_table_units():
    assert ct.ticks_to_rad(2048) == 0.0
    assert ct.ticks_to_rad(3072) == pytest.approx(math.pi / 2)
    assert ct.rad_to_ticks(-math.pi) == 0
    np.testing.assert_array_equal(ct.rad_to_ticks(ct.ticks_to_rad(np.arange(0, 4096, 7))), np.arange(0, 4096, 7))
    assert ct.velocity_units_to_rad_s(1) == pytest.approx(0.229 * 2 * math.pi / 60)
    assert ct.rad_s_to_velocity_units(1.0) == 42  # 1 rad/s = 9.549 rpm = 41.7 units of 0.229 rpm
    assert ct.PRESENT_VELOCITY.encode(-1) == hexbytes("FF FF FF FF")
    assert ct.PRESENT_POSITION.decode(hexbytes("1F 08 00 00")) == 2079
    with pytest.raises(ValueError, match=r"Torque Enable \(1 bytes\) cannot hold 256"):
        ct.TORQUE_ENABLE.encode(256)
    assert ct.STATE_BLOCK_ADDRESS == 120 and ct.STATE_BLOCK_LENGTH == 16
    assert ct.PRESENT_VELOCITY.address == 128 and ct.PRESENT_POSITION.address == 132


class FrozenClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _bank(positions=(0.0, 0.0), **kwargs):
    clock = FrozenClock()
    return ServoBank([1, 2], positions=positions, clock=clock, **kwargs), clock


def test_emulated_servos_answer_like_the_emanual():
    bank, _ = _bank(positions=ct.ticks_to_rad([166, 2079]), model_number=1030, firmware_version=38)
    replies = [r.encode() for r in bank.handle(p.ping(p.BROADCAST_ID))]
    assert replies == [hexbytes(EMANUAL[2][2]), hexbytes(EMANUAL[3][2])]
    assert [r.encode() for r in bank.handle(p.read(1, 132, 4))] == [hexbytes(EMANUAL[5][2])]
    sync = [r.encode() for r in bank.handle(p.sync_read(132, 4, [1, 2]))]
    assert sync == [hexbytes(EMANUAL[5][2]), hexbytes(EMANUAL[11][2])]
    assert bank.handle(p.ping(7)) == []  # nobody answers for an absent id


def test_emulated_servos_refuse_what_real_ones_refuse():
    bank, _ = _bank()

    def write_error(address, data, dxl_id=1):
        (reply,) = bank.handle(p.write(dxl_id, address, data))
        return reply.error_number

    assert write_error(ct.OPERATING_MODE.address, b"\x01") == 0  # EEPROM is writable with torque off
    assert write_error(ct.TORQUE_ENABLE.address, b"\x01") == 0
    assert write_error(ct.OPERATING_MODE.address, b"\x03") == p.ErrorNumber.ACCESS  # EEPROM locked by torque
    assert write_error(ct.PRESENT_POSITION.address, b"\x00\x00\x00\x00") == p.ErrorNumber.ACCESS  # read-only
    assert write_error(ct.GOAL_VELOCITY.address, b"\x10\x00") == p.ErrorNumber.DATA_LENGTH  # half a register
    too_fast = ct.GOAL_VELOCITY.encode(ct.FACTORY_VALUES[ct.VELOCITY_LIMIT] + 1)
    assert write_error(ct.GOAL_VELOCITY.address, too_fast) == p.ErrorNumber.DATA_LIMIT
    assert bank.get(1, ct.GOAL_VELOCITY) == 0  # a refused write changes nothing
    assert write_error(ct.TORQUE_ENABLE.address, b"\x00", dxl_id=2) == 0
    assert write_error(ct.OPERATING_MODE.address, b"\x10", dxl_id=2) == p.ErrorNumber.DATA_RANGE  # PWM: not emulated
    (reply,) = bank.handle(p.InstructionPacket(1, p.Instruction.FACTORY_RESET, b"\x01"))
    assert reply.error_number == p.ErrorNumber.INSTRUCTION
    assert bank.handle(p.write(p.BROADCAST_ID, ct.LED.address, b"\x01")) == []  # broadcast: done, not answered
    assert bank.get(1, ct.LED) == bank.get(2, ct.LED) == 1
    (reply,) = bank.handle(p.reboot(1))
    assert reply.error == 0 and bank.get(1, ct.TORQUE_ENABLE) == 0


def test_emulated_motion_is_the_shared_servo_model():
    bank, clock = _bank(positions=(0.5, -0.3))
    goals = {1: ct.rad_s_to_velocity_units(1.0), 2: ct.rad_s_to_velocity_units(-0.5)}
    for dxl_id in (1, 2):
        bank.handle(p.write(dxl_id, ct.OPERATING_MODE.address, b"\x01"))
    bank.handle(p.sync_write(ct.GOAL_VELOCITY.address, 4, {i: ct.GOAL_VELOCITY.encode(v) for i, v in goals.items()}))
    bank.handle(p.sync_write(ct.TORQUE_ENABLE.address, 1, {1: b"\x01", 2: b"\x01"}))
    oracle = ServoModel([ServoLimits(-math.pi, float(ct.ticks_to_rad(4095)), 350 * ct.RAD_S_PER_VELOCITY_UNIT)] * 2,
                        position=[0.5, -0.3])  # fmt: skip
    oracle.command_velocity(ct.velocity_units_to_rad_s([goals[1], goals[2]]))
    clock.now += 0.4
    for _ in range(80):
        oracle.step(0.005)
    state = bank.state()
    np.testing.assert_allclose([state[i]["position"] for i in (1, 2)], oracle.position, atol=1e-12)
    np.testing.assert_allclose([state[i]["velocity"] for i in (1, 2)], oracle.velocity, atol=1e-12)
    (reply,) = bank.handle(p.read(1, ct.PRESENT_VELOCITY.address, 8))
    assert ct.PRESENT_VELOCITY.decode(reply.params[:4]) == ct.rad_s_to_velocity_units(oracle.velocity[0])
    assert ct.PRESENT_POSITION.decode(reply.params[4:]) == ct.rad_to_ticks(oracle.position[0])
    # Torque off: goals no longer drive the servo, it coasts to a stop.
    bank.handle(p.write(1, ct.TORQUE_ENABLE.address, b"\x00"))
    clock.now += 1.0
    assert abs(bank.state()[1]["velocity"]) < 1e-6


def test_faults_are_validated():
    assert Faults(drop=0.5, corrupt=0.5).drop == 0.5
    with pytest.raises(ValueError, match=r"drop=1\.5"):
        Faults(drop=1.5)
    with pytest.raises(ValueError, match="exceed 1"):
        Faults(drop=0.6, delay=0.6)


def test_hardware_layer_imports_no_rclpy():
    """gamma_net_ros.hardware is testable on its own: no rclpy, no ROS messages."""
    for path in (REPO / "gamma_net_ros" / "hardware").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not [n for n in names if n.split(".")[0] in ("rclpy", "sensor_msgs", "diagnostic_msgs")], path
    code = (
        "import sys, gamma_net_ros.hardware.bus, gamma_net_ros.hardware.emulator; "
        "sys.exit(any(m.split('.')[0] == 'rclpy' for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0
