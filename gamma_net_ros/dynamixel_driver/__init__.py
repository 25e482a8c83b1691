"""The Dynamixel driver node: servo bus to `/joint_states`, commands to the servos.

:mod:`.node` the node; :mod:`.settings` its parameters; :mod:`.health` bus health and diagnostics.
"""
