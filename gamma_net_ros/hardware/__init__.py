"""Dynamixel servos over Protocol 2.0: packets, the X-series control table, the bus, an emulator.

Nothing here imports rclpy: the driver node (gamma_net_ros.dynamixel_driver) adapts the bus to
ROS messages, and the bus and the emulator are tested on their own.
"""
