# Source me (bash): the project's venv and its colcon overlay, as `make` uses them.
#   source tools/env.sh
_gn_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC1091
source "$_gn_root/.venv/bin/activate"
# The ROS 2 wheels install CMake packages into the venv prefix; colcon and CMake look there.
export CMAKE_PREFIX_PATH="$VIRTUAL_ENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export AMENT_PREFIX_PATH="$VIRTUAL_ENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
# colcon's setup files read variables they never set (COLCON_TRACE, ...): under a caller's
# `set -u` they stop it, so they are sourced with it off, and it is restored after.
case $- in *u*) _gn_nounset=1; set +u ;; *) _gn_nounset= ;; esac
# The ROS 2 tools `make setup` built from source where the system has none (composition_interfaces).
if [ -f "$_gn_root/build/ros2_tools/install/setup.bash" ]; then
  # shellcheck disable=SC1091
  source "$_gn_root/build/ros2_tools/install/setup.bash"
fi
if [ -f "$_gn_root/install/setup.bash" ]; then
  # shellcheck disable=SC1091
  source "$_gn_root/install/setup.bash"
fi
if [ -n "$_gn_nounset" ]; then set -u; fi
unset _gn_nounset
# This checkout's sources come first (the venv's editable install may point at another).
export PYTHONPATH="$_gn_root${PYTHONPATH:+:$PYTHONPATH}"
# Discovery stays on this machine unless the caller asked otherwise.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
unset _gn_root
