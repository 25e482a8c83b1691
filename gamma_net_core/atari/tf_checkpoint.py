"""Read a TensorFlow checkpoint (the V2 "tensor bundle" format) without TensorFlow.

A checkpoint ``PREFIX`` is ``PREFIX.index`` and ``PREFIX.data-SSSSS-of-NNNNN``. The index is
an SSTable (LevelDB's table format, which TensorFlow writes uncompressed): data blocks of
prefix-compressed key/value entries with a restart array, an index block pointing at them,
and a 48-byte footer ending in the magic 0xdb4775248b80fb57. Its keys are the variable
names (the empty key holds the bundle header); each value is a ``BundleEntryProto``
(``tensorflow/core/protobuf/tensor_bundle.proto``): dtype = 1, shape = 2, shard_id = 3,
offset = 4, size = 5, crc32c = 6, slices = 7. A tensor's bytes are ``size`` little-endian
bytes at ``offset`` in its data shard, and their CRC-32C, masked as TensorFlow masks it
(:mod:`gamma_net_core.atari.crc32c`), must equal ``crc32c``, as TensorFlow requires.

Only what Dopamine's checkpoints hold is read: whole (unsliced) tensors of numeric dtypes.
Anything else is refused with a one-line error naming the tensor.
"""

from __future__ import annotations

import os
import pathlib
import struct

import numpy as np

from gamma_net_core.atari.crc32c import crc32c, mask, unmask
from gamma_net_core.checkpoint import CheckpointError

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5  # compression type (1 byte) + crc (4 bytes)
#: TensorFlow DataType enum -> numpy dtype (types.proto), for the numeric types a checkpoint holds.
DTYPES = {
    1: np.float32,
    2: np.float64,
    3: np.int32,
    4: np.uint8,
    5: np.int16,
    6: np.int8,
    9: np.int64,
    10: np.bool_,
    17: np.uint16,
    19: np.float16,
    22: np.uint32,
    23: np.uint64,
}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise CheckpointError("truncated varint in a TensorFlow checkpoint index")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(message: bytes):
    """(field number, wire type, value) of a protobuf message; length-delimited values as bytes."""
    pos = 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(message, pos)
        elif wire == 1:
            value, pos = message[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(message, pos)
            value, pos = message[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = message[pos : pos + 4], pos + 4
        else:
            raise CheckpointError(f"unsupported protobuf wire type {wire} in a TensorFlow checkpoint index")
        yield number, wire, value


def _block(data: bytes, offset: int, size: int) -> list[tuple[bytes, bytes]]:
    """The key/value entries of one uncompressed SSTable block."""
    if offset + size + BLOCK_TRAILER_SIZE > len(data):
        raise CheckpointError("a TensorFlow checkpoint index block runs past the end of the file")
    if data[offset + size] != 0:
        raise CheckpointError(f"compressed TensorFlow index block (type {data[offset + size]}); cannot read it")
    block = data[offset : offset + size]
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * restarts
    entries, pos, key = [], 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        entries.append((key, block[pos : pos + length]))
        pos += length
    return entries


def _entries(index: bytes) -> list[tuple[bytes, bytes]]:
    if len(index) < FOOTER_SIZE or struct.unpack_from("<Q", index, len(index) - 8)[0] != TABLE_MAGIC:
        raise CheckpointError("not a TensorFlow checkpoint index (no SSTable footer magic)")
    footer = index[len(index) - FOOTER_SIZE :]
    _, pos = _varint(footer, 0)  # metaindex handle: offset, size (unused)
    _, pos = _varint(footer, pos)
    index_offset, pos = _varint(footer, pos)
    index_size, pos = _varint(footer, pos)
    entries = []
    for _, handle in _block(index, index_offset, index_size):
        offset, pos = _varint(handle, 0)
        size, _ = _varint(handle, pos)
        entries.extend(_block(index, offset, size))
    return entries


def _shape(message: bytes) -> tuple[int, ...]:
    dims = []
    for number, _, dim in _fields(message):
        if number == 2:  # TensorShapeProto.dim
            size = 0
            for n, _, v in _fields(dim):
                if n == 1:
                    size = v
            dims.append(size)
    return tuple(dims)


def checkpoint_prefix(path: str | os.PathLike) -> pathlib.Path:
    """The checkpoint prefix for ``path``: a prefix, its ``.index`` file, or a folder with a ``checkpoint`` file.

    Raises:
      FileNotFoundError: no ``PREFIX.index`` there.
    """
    path = pathlib.Path(path)
    if path.is_dir():
        state = path / "checkpoint"
        if not state.is_file():
            raise FileNotFoundError(f"{path} is a folder without a 'checkpoint' file naming the latest checkpoint")
        for line in state.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model_checkpoint_path:"):
                name = line.split(":", 1)[1].strip().strip('"')
                named = pathlib.Path(name) if os.path.isabs(name) else path / name
                # A folder moved since it was written names an absolute path elsewhere: look beside the file.
                path = named if pathlib.Path(f"{named}.index").is_file() else path / pathlib.Path(name).name
                break
        else:
            raise CheckpointError(f"{state} names no model_checkpoint_path")
    if path.suffix == ".index":
        path = path.with_suffix("")
    if not pathlib.Path(f"{path}.index").is_file():
        raise FileNotFoundError(f"no TensorFlow checkpoint at {path} ({path}.index is missing)")
    return path


def read_checkpoint(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every tensor of a TensorFlow V2 checkpoint, by variable name.

    Args:
      path: the checkpoint prefix (``.../tf_ckpt-199``), its ``.index`` file, or its folder.

    Raises:
      FileNotFoundError: no checkpoint there, or a data shard is missing.
      CheckpointError: a malformed index, a sliced or non-numeric tensor, or bytes that do not fit.
    """
    prefix = checkpoint_prefix(path)
    entries = _entries(pathlib.Path(f"{prefix}.index").read_bytes())
    shards: dict[int, bytes] = {}
    header = dict(entries).get(b"")
    num_shards = 1
    if header is not None:
        for number, _, value in _fields(header):
            if number == 1:  # BundleHeaderProto.num_shards
                num_shards = value
    tensors = {}
    for key, value in entries:
        if key == b"":
            continue
        name = key.decode("utf-8", errors="replace")
        # crc32c 0 where the index has none: TensorFlow compares the same default, and refuses.
        entry = {"dtype": 0, "shape": b"", "shard_id": 0, "offset": 0, "size": 0, "crc32c": 0, "slices": False}
        for number, _, v in _fields(value):
            if number == 1:
                entry["dtype"] = v
            elif number == 2:
                entry["shape"] = v
            elif number == 3:
                entry["shard_id"] = v
            elif number == 4:
                entry["offset"] = v
            elif number == 5:
                entry["size"] = v
            elif number == 6 and isinstance(v, bytes) and len(v) == 4:  # fixed32, masked
                (entry["crc32c"],) = struct.unpack("<I", v)
            elif number == 7:
                entry["slices"] = True
        if entry["slices"]:
            raise CheckpointError(f"checkpoint tensor {name!r} is stored in slices; only whole tensors are read")
        dtype = DTYPES.get(entry["dtype"])
        if dtype is None:
            raise CheckpointError(f"checkpoint tensor {name!r} has TensorFlow dtype {entry['dtype']}, not a number")
        shard = entry["shard_id"]
        if shard not in shards:
            data = pathlib.Path(f"{prefix}.data-{shard:05d}-of-{num_shards:05d}")
            if not data.is_file():
                raise FileNotFoundError(f"checkpoint data shard {data} is missing")
            shards[shard] = data.read_bytes()
        shape = _shape(entry["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        blob = shards[shard][entry["offset"] : entry["offset"] + entry["size"]]
        if len(blob) != entry["size"] or count * np.dtype(dtype).itemsize != entry["size"]:
            raise CheckpointError(
                f"checkpoint tensor {name!r}: {entry['size']} bytes at {entry['offset']} do not hold {shape} "
                f"{np.dtype(dtype).name}"
            )
        actual = crc32c(blob)
        if unmask(entry["crc32c"]) != actual:
            # TensorFlow refuses the same file ("Checksum does not match"): a flipped bit may make a weight 1e37.
            raise CheckpointError(
                f"checkpoint tensor {name!r}: checksum does not match (index {entry['crc32c']:#010x}, masked crc32c "
                f"of its {entry['size']} bytes in {prefix}.data-{shard:05d}-of-{num_shards:05d} "
                f"{mask(actual):#010x}): the data file is damaged"
            )
        tensors[name] = np.frombuffer(blob, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).copy()
    return tensors
