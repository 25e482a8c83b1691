"""Data in and out: rosbag2 JointState recordings with joint selection and fault filtering (rosbags);
Atari transition shards (φ, cumulant, terminal) recorded in order (:mod:`gamma_net_core.data.shards`)."""
