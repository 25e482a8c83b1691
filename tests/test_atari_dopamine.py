"""Dopamine's network layouts (SAME padding, NHWC flatten, Rainbow's C51 head) against a plain NumPy
oracle of TensorFlow's operations, on real ALE frames; their policy files play in the recorder."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import torch
from tf_bundle import write_checkpoint

from gamma_net_core.atari.dopamine import NUM_ATOMS, VMAX, from_tf_variables, network_file, same_pad
from gamma_net_core.atari.env import AtariConfig, AtariEnv
from gamma_net_core.atari.networks import load_q_network
from gamma_net_core.atari.tf_checkpoint import read_checkpoint
from gamma_net_core.checkpoint import CheckpointError, save_torch
from gamma_net_core.cli import main
from gamma_net_core.data.shards import read_transitions

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DATA = pathlib.Path(__file__).parent / "data"
A = 18  # Centipede's action count
SHAPES = {  # Dopamine's variables under Online/ (TF-Slim names), TensorFlow's layouts
    "Conv": ((8, 8, 4, 32), (32,)),
    "Conv_1": ((4, 4, 32, 64), (64,)),
    "Conv_2": ((3, 3, 64, 64), (64,)),
    "fully_connected": ((7744, 512), (512,)),
}


def dopamine_variables(agent: str, seed: int = 0, names=("weights", "biases")) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    head = (512, A * (NUM_ATOMS if agent == "rainbow" else 1))
    variables = {}
    for scope, (w, b) in {**SHAPES, "fully_connected_1": (head, (head[1],))}.items():
        fan_in = int(np.prod(w[:-1]))
        variables[f"Online/{scope}/{names[0]}"] = rng.uniform(-1, 1, w).astype(np.float32) * np.sqrt(3 / fan_in)
        variables[f"Online/{scope}/{names[1]}"] = rng.uniform(-0.1, 0.1, b).astype(np.float32)
        variables[f"Target/{scope}/{names[0]}"] = np.zeros(w, np.float32)  # never read
    return variables


def tf_conv_same(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """tf.nn.conv2d(padding='SAME') on one NHWC image [H, W, C], written from TensorFlow's documentation:
    out = ceil(in / stride); pad_total = max((out - 1) * stride + k - in, 0); pad_before = pad_total // 2."""
    k = kernel.shape[0]
    size = x.shape[0]
    out = int(np.ceil(size / stride))
    total = max((out - 1) * stride + k - size, 0)
    padded = np.zeros((size + total, size + total, x.shape[2]), np.float64)
    padded[total // 2 : total // 2 + size, total // 2 : total // 2 + size] = x
    y = np.empty((out, out, kernel.shape[3]))
    for i in range(out):
        for j in range(out):
            patch = padded[i * stride : i * stride + k, j * stride : j * stride + k, :]
            y[i, j] = np.tensordot(patch, kernel, axes=([0, 1, 2], [0, 1, 2])) + bias
    return y


def oracle(variables, agent: str, observation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dopamine's network as atari_lib builds it (slim layers, ReLU), on one [4, 84, 84] uint8 stack."""
    v = {k: v.astype(np.float64) for k, v in variables.items()}
    x = np.transpose(observation, (1, 2, 0)) / 255.0  # Dopamine's state is [84, 84, 4]
    for scope, stride in (("Conv", 4), ("Conv_1", 2), ("Conv_2", 1)):
        x = np.maximum(tf_conv_same(x, v[f"Online/{scope}/weights"], v[f"Online/{scope}/biases"], stride), 0)
    flat = x.reshape(-1)  # slim.flatten: row-major over (H, W, C)
    assert flat.size == 7744
    phi = np.maximum(flat @ v["Online/fully_connected/weights"] + v["Online/fully_connected/biases"], 0)
    out = phi @ v["Online/fully_connected_1/weights"] + v["Online/fully_connected_1/biases"]
    if agent == "dqn":
        return phi, out
    logits = out.reshape(A, NUM_ATOMS)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return phi, p @ np.linspace(-VMAX, VMAX, NUM_ATOMS)


@pytest.fixture(scope="module")
def frames() -> np.ndarray:
    env = AtariEnv(AtariConfig(), seed=0)
    observation, stacks = env.reset(), []
    for t in range(40):
        step = env.step(t % 18)
        observation = step.observation
        if t % 13 == 12:
            stacks.append(observation)
    return np.stack(stacks)


def test_tensorflow_same_padding():
    assert [same_pad(84, 8, 4), same_pad(21, 4, 2), same_pad(11, 3, 1)] == [(2, 2), (1, 2), (1, 1)]


@pytest.mark.parametrize("agent", ["dqn", "rainbow"])
def test_phi_and_q_match_dopamines_network_on_real_frames(agent, frames):
    variables = dopamine_variables(agent, seed=1 if agent == "dqn" else 2)
    network = from_tf_variables(variables, agent)
    assert network.phi.in_features == 7744 and network.num_actions == A
    with torch.no_grad():
        q, phi = network.q_and_features(torch.from_numpy(frames))
    for b, observation in enumerate(frames):
        want_phi, want_q = oracle(variables, agent, observation)
        assert (want_phi > 0).sum() > 50  # a non-trivial φ
        np.testing.assert_allclose(phi[b].numpy(), want_phi, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(q[b].numpy(), want_q, rtol=1e-4, atol=1e-5)


def test_keras_era_names_load_the_same_network(frames):
    slim = from_tf_variables(dopamine_variables("dqn", seed=3), "dqn")
    keras = from_tf_variables(dopamine_variables("dqn", seed=3, names=("kernel", "bias")), "dqn")
    with torch.no_grad():
        assert torch.equal(slim(torch.from_numpy(frames)), keras(torch.from_numpy(frames)))


def test_a_checkpoint_of_another_layout_is_refused_by_name():
    variables = dopamine_variables("dqn")
    variables["Online/fully_connected/weights"] = variables["Online/fully_connected/weights"][:3136]
    with pytest.raises(CheckpointError, match="Online/fully_connected has weights"):
        from_tf_variables(variables, "dqn")
    del variables["Online/Conv_2/biases"]
    with pytest.raises(CheckpointError, match="no variable Online/Conv_2/biases or Online/Conv_2/bias"):
        from_tf_variables(variables, "dqn")


def test_the_recorder_plays_a_dopamine_policy_file(tmp_path, frames):
    network = from_tf_variables(dopamine_variables("rainbow", seed=4), "rainbow")
    path = save_torch(tmp_path / "rainbow.pt", network_file(network, game="centipede"))
    loaded, meta = load_q_network(path, num_actions=A, game="centipede")
    assert meta["agent"] == "rainbow"
    with torch.no_grad():
        assert torch.equal(loaded(torch.from_numpy(frames)), network(torch.from_numpy(frames)))
    with pytest.raises(CheckpointError, match="made for 'centipede', not 'pong'"):
        load_q_network(path, num_actions=A, game="pong")
    out = tmp_path / "rec"
    argv = ["atari", "record", "--steps", "12", "--out", str(out), "--policy", str(path), "--no-progress"]
    assert main(argv) == 0
    data = read_transitions(out, feature_size=512)
    env = AtariEnv(AtariConfig(), seed=int(np.random.SeedSequence(0).generate_state(2)[0]))
    first = env.reset()
    with torch.no_grad():
        np.testing.assert_allclose(data.features[0], network.features(torch.from_numpy(first[None]))[0].numpy())


# ----------------------------------------------------------------------------- TensorFlow checkpoints


def test_a_checkpoint_tensorflow_wrote_is_read_without_tensorflow():
    """tests/data/tf_checkpoint was written by TensorFlow 2.21's tf.compat.v1 Saver (make_tf_checkpoint.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tf_checkpoint", DATA / "make_tf_checkpoint.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    for where in (
        DATA / "tf_checkpoint",
        DATA / "tf_checkpoint" / "tf_ckpt-1",
        DATA / "tf_checkpoint" / "tf_ckpt-1.index",
    ):
        tensors = read_checkpoint(where)
        want = maker.values()
        assert sorted(tensors) == sorted(want)
        for name, value in want.items():
            assert tensors[name].dtype == value.dtype and tensors[name].shape == value.shape, name
            np.testing.assert_array_equal(tensors[name], value, err_msg=name)


def test_crc32c_is_the_castagnoli_crc_and_tensorflows_mask_round_trips():
    from gamma_net_core.atari.crc32c import crc32c, crc32c_reference, mask, unmask

    assert crc32c(b"123456789") == crc32c_reference(b"123456789") == 0xE3069283  # the standard check value
    assert crc32c(b"") == crc32c_reference(b"") == 0
    data = np.random.default_rng(0).integers(0, 256, size=3000, dtype=np.uint8).tobytes()
    assert crc32c(data) == crc32c_reference(data)
    for crc in (0, 1, 0xE3069283, 0xFFFFFFFF):
        assert unmask(mask(crc)) == crc and mask(crc) != crc


def test_a_flipped_bit_in_a_tensorflow_written_data_file_is_refused(tmp_path):
    """TensorFlow's own file reads (its masked per-tensor checksums agree); one bit flipped, it is refused."""
    import shutil

    copy = tmp_path / "tf_checkpoint"
    shutil.copytree(DATA / "tf_checkpoint", copy)
    assert read_checkpoint(copy)  # every tensor's checksum matches as TensorFlow wrote it
    data = copy / "tf_ckpt-1.data-00000-of-00001"
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0x10
    data.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="checksum does not match"):
        read_checkpoint(copy)


def test_import_dopamine_refuses_a_data_file_with_one_flipped_bit(tmp_path, capsys):
    variables = dopamine_variables("dqn", seed=5)
    (tmp_path / "ckpt").mkdir()
    prefix = write_checkpoint(tmp_path / "ckpt" / "tf_ckpt-199", variables)
    data = pathlib.Path(f"{prefix}.data-00000-of-00001")
    blob = bytearray(data.read_bytes())
    blob[3] ^= 0x40  # an exponent bit of the first value: a weight of order 1e37, loaded before
    data.write_bytes(bytes(blob))
    out = tmp_path / "dqn.pt"
    assert main(["atari", "import-dopamine", str(prefix), "--agent", "dqn", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "checksum does not match" in err and "the data file is damaged" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow
def test_import_dopamine_turns_a_checkpoint_into_the_same_network(tmp_path, frames, capsys):
    variables = dopamine_variables("rainbow", seed=5)
    (tmp_path / "ckpt").mkdir()
    write_checkpoint(tmp_path / "ckpt" / "tf_ckpt-199", variables)
    (tmp_path / "ckpt" / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/tf_ckpt-199"\n')
    out = tmp_path / "rainbow.pt"
    argv = ["atari", "import-dopamine", str(tmp_path / "ckpt"), "--agent", "rainbow", "--out", str(out)]
    assert main(argv) == 0
    assert "7744" in capsys.readouterr().out
    network, meta = load_q_network(out, num_actions=A, game="centipede")
    assert meta["agent"] == "rainbow" and meta["source"]["checkpoint"].endswith("tf_ckpt-199")
    with torch.no_grad():
        q, phi = network.q_and_features(torch.from_numpy(frames[:1]))
    want_phi, want_q = oracle(variables, "rainbow", frames[0])
    np.testing.assert_allclose(phi[0].numpy(), want_phi, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(q[0].numpy(), want_q, rtol=1e-4, atol=1e-5)
    # The other head reads the same tensors as 918 "actions": refused for the game, nothing written.
    wrong = tmp_path / "wrong.pt"
    assert main(["atari", "import-dopamine", str(tmp_path / "ckpt"), "--agent", "dqn", "--out", str(wrong)]) == 1
    err = capsys.readouterr().err
    assert "the dqn head gives 918 actions; centipede has 18" in err and "Traceback" not in err
    assert not wrong.exists()
    assert main(["atari", "import-dopamine", str(tmp_path / "none"), "--agent", "dqn", "--out", str(wrong)]) == 1
    assert "no TensorFlow checkpoint at" in capsys.readouterr().err and not wrong.exists()
