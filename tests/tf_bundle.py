"""A minimal TensorFlow V2 checkpoint writer for tests: one data shard, one uncompressed index block.

Its output is read back by :mod:`gamma_net_core.atari.tf_checkpoint`, whose reading of the format is
checked against a checkpoint TensorFlow itself wrote (tests/data/tf_checkpoint, made by
tests/data/make_tf_checkpoint.py); this lets a test build a full-size Dopamine checkpoint
without TensorFlow installed.
"""

from __future__ import annotations

import pathlib
import struct

import numpy as np

from gamma_net_core.atari.crc32c import crc32c, mask
from gamma_net_core.atari.tf_checkpoint import DTYPES, TABLE_MAGIC

CODES = {np.dtype(v): k for k, v in DTYPES.items()}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1) + b"\x00" + b"\x00\x00\x00\x00"  # one restart; no compression, crc


def write_checkpoint(prefix: str | pathlib.Path, tensors: dict[str, np.ndarray]) -> pathlib.Path:
    """Write ``tensors`` as checkpoint ``prefix`` (.index and .data-00000-of-00001); returns the prefix."""
    prefix = pathlib.Path(prefix)
    data = bytearray()
    entries = [(b"", _field(1, 1))]  # BundleHeaderProto.num_shards = 1
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        shape = b"".join(_field(2, _field(1, int(d))) for d in a.shape)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        checksum = _varint(6 << 3 | 5) + struct.pack("<I", mask(crc32c(raw)))  # fixed32, as TensorFlow writes it
        proto = _field(1, CODES[a.dtype]) + _field(2, shape) + _field(4, len(data)) + _field(5, a.nbytes) + checksum
        entries.append((name.encode(), proto))
        data += raw
    blocks = bytearray(_block(entries))
    data_size = len(blocks) - 5
    meta_offset = len(blocks)
    blocks += _block([])
    index_offset = len(blocks)
    blocks += _block([(entries[-1][0], _varint(0) + _varint(data_size))])
    handles = _varint(meta_offset) + _varint(8) + _varint(index_offset) + _varint(len(blocks) - index_offset - 5)
    footer = handles.ljust(40, b"\x00") + struct.pack("<Q", TABLE_MAGIC)
    pathlib.Path(f"{prefix}.index").write_bytes(bytes(blocks) + footer)
    pathlib.Path(f"{prefix}.data-00000-of-00001").write_bytes(bytes(data))
    return prefix
