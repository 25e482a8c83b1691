"""The robot-arm study's Γ-net exported as the predictor node's checkpoint, so the node resumes it.

Part of `gamma-net arm train` (:mod:`gamma_net_studies.arm_train`).
"""

from __future__ import annotations

import pathlib

import numpy as np


def save_resumable(net, config, path: pathlib.Path, *, joints, timescales, max_gap: float) -> pathlib.Path:
    """Save ``net`` as the predictor node's checkpoint: its settings from the YAML, so it resumes learning.

    The study decays alpha to zero over the recording; a checkpoint saved with that schedule would
    never learn again once resumed, so the learner is saved with ``config`` (the node's constant
    alpha) and differs from the trained one in its step-size schedule only; anything else that
    differs is refused. The file is an :class:`~gamma_net_core.joint_stream.OnlineGammaNet` checkpoint
    (with the joint selection, Gamma_t sampling and episode gap the node checks on resume):
    ``checkpoint_path`` of the `predictor` node can point at it.
    """
    from gamma_net_core.config import to_mapping
    from gamma_net_core.joint_stream import OnlineGammaNet
    from gamma_net_core.linear import LinearGammaNet

    trained, wanted = to_mapping(net.config), to_mapping(config)
    differ = sorted(k for k in trained if trained[k] != wanted[k] and k != "step_size_decay_steps")
    if differ:
        raise ValueError(f"the checkpoint's configuration differs from the trained one in {differ}")
    resumable = LinearGammaNet.from_arrays(
        config, net.to_state_dict(), update_count=net.update_count, source="the trained Γ-net"
    )
    online = OnlineGammaNet(
        joints=joints,
        learner=config,
        timescales=timescales,
        rng=np.random.default_rng(0),
        max_gap=max_gap,
        _net=resumable,
    )
    return online.save(path)
