"""Experiments that orchestrate ROS processes (launches) and read what they report."""
