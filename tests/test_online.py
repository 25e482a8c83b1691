"""OnlineGammaNet: message-by-message learning equals learning the recording at once."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.checkpoint import CheckpointError, load_npz, save_npz
from gamma_net_core.data.joints import JointsConfig, Skip
from gamma_net_core.joint_stream import KIND, VERSION, OnlineGammaNet
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.timescales import TimescaleSampling

NAMES = ["shoulder", "elbow"]


def _online(seed=0, **kwargs) -> OnlineGammaNet:
    return OnlineGammaNet(
        joints=JointsConfig(),
        learner=GammaNetConfig(timescale_input="both"),
        timescales=TimescaleSampling(n_gamma=1, n_tau=29),
        rng=np.random.default_rng(seed),
        **kwargs,
    )


def _stream(n=200, gap_at=120):
    t = np.arange(n) / 30.0
    t[gap_at:] += 5.0  # a pause longer than max_gap: a new episode
    position = np.stack([-0.7 + 0.4 * np.sin(t), 1.7 + 0.3 * np.cos(t)], axis=1)
    velocity = np.stack([0.4 * np.cos(t), -0.3 * np.sin(t)], axis=1)
    return t, position, velocity


def test_stream_and_recording_learn_the_same_weights():
    t, position, velocity = _stream()
    one = _online()
    for i in range(len(t)):
        step = one.observe(stamp=t[i], names=NAMES, position=position[i], velocity=velocity[i])
        assert not isinstance(step, Skip)
    at_once = _online()
    selected = [
        at_once.selector.select(stamp=t[i], names=NAMES, position=position[i], velocity=velocity[i])
        for i in range(len(t))
    ]
    updates = at_once.learn_recording(
        stamps=[s.stamp for s in selected],
        inputs=[s.inputs for s in selected],
        cumulants=[s.cumulant for s in selected],
    )
    assert updates == one.update_count == len(t) - 2  # no update across the gap
    assert one.episodes == at_once.episodes == 2
    np.testing.assert_allclose(at_once.net.weights, one.net.weights, rtol=0, atol=1e-12)


def test_save_resume_and_refusal(tmp_path):
    t, position, velocity = _stream(60, gap_at=60)
    online = _online()
    for i in range(len(t)):
        online.observe(stamp=t[i], names=NAMES, position=position[i], velocity=velocity[i])
    path = online.save(tmp_path / "online.npz")
    resumed = _online(seed=5)
    resumed.resume(path)
    assert resumed.update_count == online.update_count
    np.testing.assert_array_equal(resumed.net.weights, online.net.weights)
    # A resumed learner starts a new episode: the next reading is a state, not a transition.
    for learner in (online, resumed):
        learner.start_episode()
        learner.observe(stamp=10.0, names=NAMES, position=position[0], velocity=velocity[0])
    np.testing.assert_array_equal(resumed.predict([0.0, 0.9, 0.99]), online.predict([0.0, 0.9, 0.99]))
    # A version 1 file (loss-scaled weights that meant V, not f = (1 - gamma) V) is refused, not misread.
    config, arrays, meta = load_npz(path, kind=KIND, version=VERSION)
    save_npz(tmp_path / "v1.npz", kind=KIND, version=1, config=config, arrays=arrays, meta=meta)
    with pytest.raises(CheckpointError, match="version 1; this code reads 2"):
        resumed.resume(tmp_path / "v1.npz")
    other = _online(max_gap=2.0)
    with pytest.raises(CheckpointError, match=r"max_gap: file has 1\.0, expected 2\.0"):
        other.resume(path)
    assert other.update_count == 0


def test_predict_needs_a_reading_and_valid_gammas():
    online = _online()
    with pytest.raises(ValueError, match="no joint reading"):
        online.predict([0.9])
    online.observe(stamp=0.0, names=NAMES, position=[-0.7, 1.7], velocity=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"got 1\.0"):
        online.predict([0.5, 1.0])
