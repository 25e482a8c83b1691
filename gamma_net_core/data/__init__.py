"""Data in and out: rosbag2 JointState recordings with joint selection and fault filtering (rosbags)."""
