"""Every command form of the reflex reads back what it writes: the round trip through real messages."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gamma_net_core.reflex.commands import JointCommand, joint_command
from gamma_net_ros.reflex.forms import COMMAND_FORMS, make_form, register_form

JOINTS = ["shoulder", "elbow"]
VALUES = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
#: The fields each form carries: what a command in it can hold, per point.
FIELDS = {
    "joint_state": ("position", "velocity", "effort"),
    "float64_multi_array": ("velocity",),  # its interface, velocity here
    "twist": ("velocity",),
    "twist_stamped": ("velocity",),
    "joint_trajectory": ("position", "velocity", "acceleration"),
}


def test_every_registered_form_has_a_round_trip_here():
    assert set(COMMAND_FORMS) == set(FIELDS)


def _command(form, fields, rows: list[list[float]]) -> JointCommand:
    n = len(form.names)
    return joint_command(form.names, **{f: [row[i * n : (i + 1) * n] for row in rows] for i, f in enumerate(fields)})


@pytest.mark.parametrize("kind", sorted(FIELDS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_form_reads_back_the_command_it_wrote(kind, data):
    form = make_form(kind, "velocity", list(JOINTS))
    fields = FIELDS[kind]
    points = data.draw(st.integers(min_value=1, max_value=3)) if kind == "joint_trajectory" else 1
    width = len(form.names) * len(fields)
    rows = data.draw(st.lists(st.lists(VALUES, min_size=width, max_size=width), min_size=points, max_size=points))
    sent = _command(form, fields, rows)
    back = form.read(form.write(sent))
    assert back.names == sent.names
    for field in ("position", "velocity", "acceleration", "effort"):
        want, got = getattr(sent, field), getattr(back, field)
        assert (want is None) == (got is None), field
        if want is not None:
            np.testing.assert_array_equal(got, want)


def test_a_hold_written_with_no_incoming_message_is_a_valid_message_of_the_form():
    for kind in FIELDS:
        form = make_form(kind, "velocity", list(JOINTS))
        zero = joint_command(form.names, velocity=[[0.0] * len(form.names)])
        assert isinstance(form.write(zero), form.cls), kind


def test_an_unknown_command_type_is_one_line_naming_the_known_ones():
    with pytest.raises(ValueError) as refused:
        make_form("pose", "velocity", list(JOINTS))
    assert str(refused.value) == f"parameter command_type must be one of {COMMAND_FORMS.names()}; got 'pose'"
    assert "\n" not in str(refused.value)


def test_a_command_type_is_registered_once():
    with pytest.raises(ValueError, match="command form 'twist' is registered already"):
        register_form("twist")(type("Another", (), {}))
