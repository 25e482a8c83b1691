"""Prediction's `cumulant` field was renamed `question`: recordings made before still read.

The rename keeps the field's position and type, so the CDR bytes are the same (CDR carries no
field names) and an old bag's messages deserialize under the new definition; rosbags, which
reads a bag by the definition stored in it, gives an old message `cumulant`, which
:func:`prediction_question` reads as well.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from gamma_net_core.horde.fields import prediction_question

MSG = Path(__file__).resolve().parents[1] / "msg" / "msg" / "Prediction.msg"
TYPE = "gamma_net_msgs/msg/Prediction"


def _store(definition: str):
    store = get_typestore(Stores.ROS2_KILTED)
    store.register(get_types_from_msg(definition, TYPE))
    return store


def _old_definition() -> str:
    """Prediction.msg as it was before the rename."""
    new = MSG.read_text()
    assert "string question" in new
    return new.replace("string question", "string cumulant")


def _old_message(store, name: str):
    types = store.types
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=3, nanosec=5), frame_id="")
    return types[TYPE](
        header=header,
        cumulant=name,
        gammas=np.array([0.0, 0.9]),
        values=np.array([1.5, 7.0]),
        update_count=11,
    )


def test_an_old_message_deserializes_under_the_new_definition():
    old, new = _store(_old_definition()), _store(MSG.read_text())
    raw = old.serialize_cdr(_old_message(old, "|shoulder.velocity|"), TYPE)
    msg = new.deserialize_cdr(raw, TYPE)
    assert msg.question == "|shoulder.velocity|" and prediction_question(msg) == "|shoulder.velocity|"
    assert list(msg.values) == [1.5, 7.0] and msg.update_count == 11
    assert new.serialize_cdr(msg, TYPE).tobytes() == raw.tobytes()  # the wire format did not change


def test_an_old_bag_reads_by_its_stored_definition(tmp_path):
    old = _store(_old_definition())
    bag = tmp_path / "old_predictions"
    with Writer(bag, version=9) as writer:
        connection = writer.add_connection("/predictor/predictions", TYPE, typestore=old)
        for i, name in enumerate(["a", "b"]):
            writer.write(connection, i, old.serialize_cdr(_old_message(old, name), TYPE))
    with AnyReader([bag], default_typestore=get_typestore(Stores.ROS2_KILTED)) as reader:
        read = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages()]
    assert [prediction_question(m) for m in read] == ["a", "b"]
    assert not hasattr(read[0], "question")  # rosbags used the bag's own definition


def test_a_message_without_a_name_is_refused():
    with pytest.raises(ValueError, match="neither a 'question' nor a 'cumulant'"):
        prediction_question(object())
