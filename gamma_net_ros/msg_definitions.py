"""Message definitions for a bag, from the ``.msg`` files the installed interface packages ship.

A rosbag2 in mcap storage carries each topic's message definition (and rosbag2 since Iron its
type hash), so a reader without the message package installed can decode it: `rosbags`'
``AnyReader`` does exactly that. What is recorded must say what it recorded, and the definition
that matches the bytes is the one installed here: every interface package installs its
``share/PKG/msg/TYPE.msg`` (gamma_net_msgs too, once built), found through the ament index like
`ros2 bag record` finds it. A type with no ``.msg`` there (a definition only in ``.idl``) falls
back to the definitions `rosbags` ships for ROS 2 Kilted.
"""

from __future__ import annotations

import pathlib

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.base import Nodetype
from rosbags.typesys.store import Typestore


def _msg_file(type_name: str) -> pathlib.Path | None:
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    package, _, name = type_name.split("/")
    try:
        path = pathlib.Path(get_package_share_directory(package), "msg", f"{name}.msg")
    except (PackageNotFoundError, OSError):  # OSError: no AMENT_PREFIX_PATH at all
        return None
    return path if path.is_file() else None


def _names(node) -> list[str]:
    """The message type names a field's parse tree refers to (nested in sequences and arrays)."""
    kind, rest = node
    if kind == Nodetype.NAME:
        return [rest]
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return _names(rest[0])
    return []


class MessageDefinitions:
    """rosbag2's ``(msgdef, rihs01)`` of message types, each read once from its package's ``.msg`` file."""

    def __init__(self) -> None:
        self.store = Typestore()
        self._fallback = None

    def _register(self, type_name: str) -> None:
        pending = [type_name]
        while pending:
            name = pending.pop()
            if name in self.store.fielddefs:
                continue
            path = _msg_file(name)
            if path is not None:
                types = get_types_from_msg(path.read_text(), name)
            else:
                if self._fallback is None:
                    self._fallback = get_typestore(Stores.ROS2_KILTED)
                if name not in self._fallback.fielddefs:
                    raise ValueError(
                        f"no message definition for {name}: no msg/{name.split('/')[-1]}.msg in package "
                        f"{name.split('/')[0]!r} on AMENT_PREFIX_PATH (is its package built and sourced?)"
                    )
                types = {name: self._fallback.fielddefs[name]}
            self.store.register(types)
            for _, fields in types.values():
                pending.extend(n for _, node in fields for n in _names(node))

    def of(self, type_name: str) -> tuple[str, str]:
        """``(msgdef, rihs01)`` of ``pkg/msg/Type`` for ``rosbags.rosbag2.Writer.add_connection``.

        Raises:
          ValueError: no definition of the type (or of a type it contains) can be found.
        """
        self._register(type_name)
        msgdef, _ = self.store.generate_msgdef(type_name, ros_version=2)
        return msgdef, self.store.hash_rihs01(type_name)
