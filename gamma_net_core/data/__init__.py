"""Recorded data: transition shards (Atari φ, cumulant, terminal) and, later, rosbag2 joint states."""
