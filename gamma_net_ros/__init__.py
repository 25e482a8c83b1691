"""gamma_net_ros: rclpy nodes, thin adapters between ROS 2 messages and gamma_net_core."""
