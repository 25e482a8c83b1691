"""docs/extending.md's worked examples, taken from the page as written and run end to end.

Each fenced block after a ``<!-- file: NAME -->`` marker is (a part of) the file NAME; the
module and the questions file are written to a folder of their own and used as a user would:
the questions file imports the module, and the new transform and readout work through it.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from guides import guide_text
from sensor_msgs.msg import JointState

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.readouts import READOUT_KINDS, discount_function, ideal_discount
from gamma_net_core.horde.transforms import TRANSFORMS
from gamma_net_ros.horde.rows import Row

BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)^```", re.S | re.M)


def guide_files() -> dict[str, str]:
    """{file name: its text}, the blocks of one name joined in page order."""
    files: dict[str, str] = {}
    for name, text in BLOCK.findall(guide_text("extending")):
        files[name] = files.get(name, "") + text + "\n"
    return files


@pytest.fixture
def extension(tmp_path, monkeypatch):
    """The page's module and questions file in ``tmp_path``, the module importable; unregistered after."""
    files = guide_files()
    assert set(files) == {"my_signals.py", "my_forms.py", "questions.yaml"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "questions.yaml"
    sys.modules.pop("my_signals", None)
    for registry, name in ((TRANSFORMS, "deadband"), (READOUT_KINDS, "average")):
        if name in registry:
            registry.remove(name)


def joint_state(position: float, velocity: float) -> JointState:
    return JointState(name=["shoulder"], position=[position], velocity=[velocity])


def test_the_guides_transform_and_readout_work_through_its_questions_file(extension):
    assert "deadband" not in TRANSFORMS  # nothing but the file's extensions key registers them
    spec = load_questions(extension)
    (question,) = spec.questions
    assert question.cumulant.transform == "deadband" and dict(question.cumulant.parameters) == {"width": 0.05}
    # the transform, as the Horde's rows read it from a real message (and the reflex, the same function)
    row = Row(spec)
    for velocity, expected in [(0.03, 0.0), (-0.04, 0.0), (0.2, 0.2), (-0.5, -0.5)]:
        reading = row.read({"/joint_states": joint_state(-0.8, velocity)})
        assert reading.usable.all() and reading.cumulants[0] == expected
        assert question.cumulant.read(joint_state(-0.8, velocity)) == expected
    # the readout: its weights give exactly the discount it stands for, and a learner publishes it
    (readout,) = spec.readouts
    learner = HordeLearner.from_spec(spec)
    gammas, coefficients = learner.readout_weights("average_1s")
    t = np.arange(200)
    np.testing.assert_allclose(
        discount_function(gammas, coefficients, t),
        ideal_discount(readout, t, rate_hz=spec.rate_hz, tau_max=spec.timescales.tau_max),
    )
    assert gammas[0] == pytest.approx(1 - 1 / 30)
    for step in range(1000):  # a constant cumulant: its average is that constant (learned at the defaults' alpha)
        inputs, cumulants, continuations = row({"/joint_states": joint_state(-0.8 + 0.5 * np.sin(step / 10), 0.2)})
        learner.step(inputs, cumulants, continuations)
    assert learner.readout(inputs, "average_1s")[0] == pytest.approx(0.2, abs=0.05)


def test_the_guides_entries_refuse_what_they_do_not_take(extension):
    text = extension.read_text()
    for wrong, says in [
        (text.replace(", width: 0.05", ""), "question 'shoulder_moving'.cumulant.width: required by the deadband"),
        (text.replace("width: 0.05", "width: wide"), "cumulant.width: must be a finite number; got 'wide'"),
        (text.replace("seconds: 1.0", "seconds: 3.0"), "readout 'average_1s'.seconds: 3.0 s is 90 steps at 30.0 Hz"),
        (
            text.replace("seconds: 1.0}", "seconds: 1.0, k: 2}"),
            "readout 'average_1s'.k: the average readout takes ['seconds'], not 'k'",
        ),
        (text.replace("[my_signals]", "[my_signalz]"), "extensions: cannot import 'my_signalz' (ModuleNotFound"),
    ]:
        extension.write_text(wrong)
        with pytest.raises(ValueError) as err:
            load_questions(extension)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_guides_command_form_round_trips_and_holds_at_zero(extension):
    from gamma_net_core.reflex.commands import joint_command
    from gamma_net_ros.reflex.forms import COMMAND_FORMS, make_form

    assert "float64" not in COMMAND_FORMS
    try:
        __import__("my_forms")  # as a questions file's extensions key imports it
        form = make_form("float64", "velocity", ["wheel"])
        for speed in (0.0, 0.35, -2.5):
            message = form.write(joint_command(["wheel"], velocity=[[speed]]))
            assert type(message).__name__ == "Float64" and message.data == speed
            assert form.read(message).velocity.tolist() == [[speed]] and form.read(message).names == ("wheel",)
        assert form.holding.fields == ("velocity",)  # a stop holds the wheel at zero velocity
        with pytest.raises(ValueError, match=r"command_type float64 drives one joint's velocity; got \['a', 'b'\]"):
            make_form("float64", "velocity", ["a", "b"])
    finally:
        sys.modules.pop("my_forms", None)
        if "float64" in COMMAND_FORMS:
            COMMAND_FORMS.remove("float64")
