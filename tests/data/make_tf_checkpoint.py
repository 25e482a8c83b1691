"""Writes tests/data/tf_checkpoint/ with TensorFlow's own Saver (TF 1 graph mode, as Dopamine 2019 saved).

Not run by the tests (TensorFlow is not a project dependency): run it in a scratch venv with
tensorflow-cpu to remake the fixture. The values are VALUES(seed) below, which the tests recompute.
"""

import pathlib
import sys

import numpy as np

#: name -> (shape, dtype): Dopamine-style names, small shapes, the dtypes a checkpoint holds.
SPEC = {
    "Online/Conv/weights": ((2, 2, 1, 3), np.float32),
    "Online/Conv/biases": ((3,), np.float32),
    "Online/fully_connected/weights": ((12, 5), np.float32),
    "Target/Conv/weights": ((2, 2, 1, 3), np.float32),
    "beta1_power": ((), np.float32),
    "global_step": ((), np.int64),
    "counts": ((4,), np.int32),
    "scale": ((2, 2), np.float64),
}


def values(seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for name, (shape, dtype) in SPEC.items():
        if np.issubdtype(dtype, np.integer):
            out[name] = rng.integers(-1000, 1000, size=shape).astype(dtype)
        else:
            out[name] = rng.normal(size=shape).astype(dtype)
    return out


if __name__ == "__main__":
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "tf_checkpoint")
    out.mkdir(parents=True, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.Variable(v, name=n) for n, v in values().items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(out / "tf_ckpt"), global_step=1)
