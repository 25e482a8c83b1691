"""Dynamixel Protocol 2.0 packets: framing, CRC-16, byte stuffing, instruction and status packets.

The layout (ROBOTIS e-manual, "Protocol 2.0")::

    FF FF FD 00 | ID | LEN_L LEN_H | INST | [ERR] PARAM... | CRC_L CRC_H

``LEN`` counts the instruction, the (stuffed) parameters and the two CRC bytes. Wherever the
body (instruction and parameters) would contain the header pattern ``FF FF FD``, a ``FD`` is
inserted after it ("byte stuffing"); the length and the CRC cover the stuffed body. A status
packet is an instruction packet whose instruction is ``0x55`` and whose first parameter is the
error byte.

The emulator builds and parses packets with this module; the driver talks through the real
``dynamixel_sdk``, whose own implementation the tests use as an independent oracle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC  # 0xFD and 0xFF would collide with the header
MAX_PACKET_LENGTH = 1024  # the SDK's buffer size; longer frames are refused as corrupt
_STUFF_PATTERN = b"\xff\xff\xfd"


class Instruction(IntEnum):
    PING = 0x01
    READ = 0x02
    WRITE = 0x03
    REG_WRITE = 0x04
    ACTION = 0x05
    FACTORY_RESET = 0x06
    REBOOT = 0x08
    CLEAR = 0x10
    STATUS = 0x55
    SYNC_READ = 0x82
    SYNC_WRITE = 0x83
    BULK_READ = 0x92
    BULK_WRITE = 0x93


class ErrorNumber(IntEnum):
    """The low 7 bits of a status packet's error byte."""

    NONE = 0x00
    RESULT_FAIL = 0x01
    INSTRUCTION = 0x02
    CRC = 0x03
    DATA_RANGE = 0x04
    DATA_LENGTH = 0x05
    DATA_LIMIT = 0x06
    ACCESS = 0x07


ALERT_BIT = 0x80  # set with any error number when the servo has a hardware error


class PacketError(ValueError):
    """A frame that is not a valid Protocol 2.0 packet; the message says what is wrong."""


def _crc_table(polynomial: int = 0x8005) -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ polynomial) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


CRC_TABLE = _crc_table()


def crc16(data: bytes | bytearray | Iterable[int], crc: int = 0) -> int:
    """ROBOTIS CRC-16 (polynomial 0x8005, initial 0, not reflected) over ``data``."""
    for byte in data:
        crc = ((crc << 8) ^ CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]) & 0xFFFF
    return crc


def stuff(body: bytes) -> bytes:
    """Insert ``FD`` after every ``FF FF FD`` of ``body`` (instruction + parameters)."""
    out = bytearray()
    for byte in body:
        out.append(byte)
        # An inserted FD never starts a new pattern (patterns start with FF), so matching on
        # the output is matching on the original bytes.
        if out.endswith(_STUFF_PATTERN):
            out.append(0xFD)
    return bytes(out)


def unstuff(stuffed: bytes) -> bytes:
    """Remove the ``FD`` that follows each ``FF FF FD`` (the inverse of :func:`stuff`)."""
    out = bytearray()
    i = 0
    while i < len(stuffed):
        out.append(stuffed[i])
        i += 1
        if out.endswith(_STUFF_PATTERN):
            if i >= len(stuffed) or stuffed[i] != 0xFD:
                raise PacketError(f"FF FF FD not followed by a stuffing FD at body byte {i} of {stuffed.hex(' ')}")
            i += 1
    return bytes(out)


def encode(packet_id: int, body: bytes) -> bytes:
    """Frame ``body`` (instruction byte + parameters, unstuffed) for ``packet_id``: header, length, CRC."""
    if not 0 <= packet_id <= 0xFF or packet_id in (0xFD, 0xFF):
        raise PacketError(f"packet id {packet_id} is not a Protocol 2.0 id (0..252, or 254 for broadcast)")
    stuffed = stuff(body)
    length = len(stuffed) + 2
    if length + 7 > MAX_PACKET_LENGTH:
        raise PacketError(f"packet of {length + 7} bytes exceeds the {MAX_PACKET_LENGTH}-byte limit")
    frame = HEADER + bytes([packet_id, length & 0xFF, length >> 8]) + stuffed
    crc = crc16(frame)
    return frame + bytes([crc & 0xFF, crc >> 8])


def decode(frame: bytes) -> tuple[int, bytes]:
    """Check one complete frame and return ``(packet id, unstuffed body)``.

    Raises:
      PacketError: wrong header, a length that disagrees with the frame, or a CRC mismatch.
    """
    frame = bytes(frame)
    if len(frame) < 10:
        raise PacketError(f"frame of {len(frame)} bytes is shorter than the 10-byte minimum: {frame.hex(' ')}")
    if not frame.startswith(HEADER):
        raise PacketError(f"frame does not start with the header FF FF FD 00: {frame[:4].hex(' ')}")
    length = frame[5] | (frame[6] << 8)
    if length + 7 != len(frame):
        raise PacketError(f"length field says {length + 7} bytes but the frame has {len(frame)}")
    expected = crc16(frame[:-2])
    received = frame[-2] | (frame[-1] << 8)
    if expected != received:
        raise PacketError(f"CRC mismatch: frame carries 0x{received:04X}, its bytes give 0x{expected:04X}")
    return frame[4], unstuff(frame[7:-2])


def next_frame(buffer: bytearray) -> bytes | None:
    """Cut the first complete frame out of a receive ``buffer`` (in place); None if none is complete yet.

    Bytes before a header are discarded (line noise, or the tail of a damaged frame). A frame
    is returned whole, CRC unchecked: :func:`decode` says whether it is valid.
    """
    while True:
        start = buffer.find(HEADER)
        if start < 0:
            # keep a possible partial header at the end
            keep = next((k for k in range(min(3, len(buffer)), 0, -1) if HEADER.startswith(buffer[-k:])), 0)
            del buffer[: len(buffer) - keep]
            return None
        del buffer[:start]
        if len(buffer) < 7:
            return None
        length = buffer[5] | (buffer[6] << 8)
        if length < 3 or length + 7 > MAX_PACKET_LENGTH:
            del buffer[:1]  # not a real header: resynchronise on the next one
            continue
        if len(buffer) < length + 7:
            return None
        frame = bytes(buffer[: length + 7])
        del buffer[: length + 7]
        return frame


@dataclass(frozen=True)
class InstructionPacket:
    """An instruction from the controller to servo ``id`` (or all, for ``BROADCAST_ID``)."""

    id: int
    instruction: int
    params: bytes = b""

    def encode(self) -> bytes:
        return encode(self.id, bytes([self.instruction]) + bytes(self.params))

    @classmethod
    def decode(cls, frame: bytes) -> InstructionPacket:
        packet_id, body = decode(frame)
        if not body:
            raise PacketError("packet has no instruction byte")
        if body[0] == Instruction.STATUS:
            raise PacketError(f"expected an instruction packet, got a status packet from id {packet_id}")
        return cls(packet_id, body[0], body[1:])


@dataclass(frozen=True)
class StatusPacket:
    """A servo's reply: its id, the error byte (0 = fine) and the returned parameters."""

    id: int
    error: int = 0
    params: bytes = b""

    def encode(self) -> bytes:
        return encode(self.id, bytes([Instruction.STATUS, self.error]) + bytes(self.params))

    @classmethod
    def decode(cls, frame: bytes) -> StatusPacket:
        packet_id, body = decode(frame)
        if len(body) < 2 or body[0] != Instruction.STATUS:
            raise PacketError(f"expected a status packet (instruction 0x55 + error byte), got body {body.hex(' ')}")
        return cls(packet_id, body[1], body[2:])

    @property
    def error_number(self) -> int:
        """The error without the alert bit (an :class:`ErrorNumber` value)."""
        return self.error & 0x7F

    @property
    def alert(self) -> bool:
        return bool(self.error & ALERT_BIT)


def _u16(value: int) -> bytes:
    if not 0 <= value <= 0xFFFF:
        raise PacketError(f"{value} does not fit in 16 bits")
    return bytes([value & 0xFF, value >> 8])


def _check_id(dxl_id: int, *, broadcast: bool = False) -> None:
    if not (0 <= dxl_id <= MAX_ID or (broadcast and dxl_id == BROADCAST_ID)):
        raise PacketError(f"servo id {dxl_id} is outside 0..{MAX_ID}")


def ping(dxl_id: int) -> InstructionPacket:
    _check_id(dxl_id, broadcast=True)
    return InstructionPacket(dxl_id, Instruction.PING)


def read(dxl_id: int, address: int, length: int) -> InstructionPacket:
    _check_id(dxl_id)
    return InstructionPacket(dxl_id, Instruction.READ, _u16(address) + _u16(length))


def write(dxl_id: int, address: int, data: bytes) -> InstructionPacket:
    _check_id(dxl_id, broadcast=True)
    return InstructionPacket(dxl_id, Instruction.WRITE, _u16(address) + bytes(data))


def reboot(dxl_id: int) -> InstructionPacket:
    _check_id(dxl_id, broadcast=True)
    return InstructionPacket(dxl_id, Instruction.REBOOT)


def sync_read(address: int, length: int, ids: Iterable[int]) -> InstructionPacket:
    ids = list(ids)
    for dxl_id in ids:
        _check_id(dxl_id)
    return InstructionPacket(BROADCAST_ID, Instruction.SYNC_READ, _u16(address) + _u16(length) + bytes(ids))


def sync_write(address: int, length: int, data: Mapping[int, bytes]) -> InstructionPacket:
    params = bytearray(_u16(address) + _u16(length))
    for dxl_id, chunk in data.items():
        _check_id(dxl_id)
        if len(chunk) != length:
            raise PacketError(f"sync write of {length} bytes got {len(chunk)} bytes for id {dxl_id}")
        params += bytes([dxl_id]) + bytes(chunk)
    return InstructionPacket(BROADCAST_ID, Instruction.SYNC_WRITE, bytes(params))


def parse_sync_read(params: bytes) -> tuple[int, int, list[int]]:
    """``(address, length, ids)`` of a SYNC_READ's parameters."""
    if len(params) < 5:
        raise PacketError(f"SYNC_READ needs address, length and at least one id; got {len(params)} parameter bytes")
    return params[0] | params[1] << 8, params[2] | params[3] << 8, list(params[4:])


def parse_sync_write(params: bytes) -> tuple[int, int, dict[int, bytes]]:
    """``(address, length, {id: data})`` of a SYNC_WRITE's parameters."""
    if len(params) < 4:
        raise PacketError(f"SYNC_WRITE needs address and length; got {len(params)} parameter bytes")
    address, length = params[0] | params[1] << 8, params[2] | params[3] << 8
    chunks = params[4:]
    if length == 0 or len(chunks) % (length + 1):
        raise PacketError(f"SYNC_WRITE of {length} bytes per servo has {len(chunks)} bytes of id+data")
    return address, length, {chunks[i]: chunks[i + 1 : i + 1 + length] for i in range(0, len(chunks), length + 1)}
