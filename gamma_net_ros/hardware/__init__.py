"""Dynamixel servos over Protocol 2.0, with no rclpy import so each part is tested on its own.

- protocol: packets, CRC-16, byte stuffing.
- control_table: X-series addresses, sizes and units (ticks, 0.229 rpm) <-> rad, rad/s.
- bus: DynamixelBus, the servos on one port through dynamixel_sdk (sync read/write, retries, reconnect).
- goals: JointGoals, commands by joint name clamped to limits, soft stop, command timeout.
- emulator: ServoBank + ServoEmulator, servos on a pseudo-terminal with fault injection.

The driver node (gamma_net_ros.dynamixel_driver.node) adapts these to ROS messages.
"""
