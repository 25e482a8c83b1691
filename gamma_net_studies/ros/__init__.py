"""Studies, benchmarks and the demo that start real ROS 2 nodes and read what they report (need rclpy)."""
