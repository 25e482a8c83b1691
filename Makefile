# gamma_net_ros: the README's two commands are `make demo` and `make test`.
# Each target sets up what is missing (venv, pinned dependencies, colcon build) and
# skips what is up to date, so a second run starts its real work within seconds.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3.11
VENV := .venv
DEPS_STAMP := $(VENV)/.deps-stamp
EDITABLE_STAMP := $(VENV)/.editable-stamp
BUILD_STAMP := build/.colcon-stamp
# numba's cache of compiled kernels, filled ahead so that nodes start ready (`gamma-net warmup`); numba
# itself recompiles a kernel whose source changed, this stamp only says when to warm again.
WARM_STAMP := build/.numba-warm-stamp
KERNEL_SOURCES := $(shell grep -rl 'cache=True' gamma_net_core 2>/dev/null) gamma_net_core/warmup.py
# The ROS 2 command-line and launch tools (`ros2 launch|run|topic|param|service|node`) have no
# PyPI wheels: on a machine without ROS they are installed from their sources in ROS2_VENDOR
# (a read-only folder is fine: it is copied under build/ first). With ROS from apt sourced,
# nothing is installed.
ROS2_VENDOR ?= ../shared/vendor/ros2
ROS2_TOOLS := build/ros2_tools
ROS2_TOOLS_STAMP := $(ROS2_TOOLS)/.stamp
ROS2_TOOLS_PIP := launch/launch launch/launch_xml launch/launch_yaml launch_ros/launch_ros \
  launch_ros/ros2launch rosidl_runtime_py ros2cli/ros2cli ros2cli/ros2topic ros2cli/ros2param \
  ros2cli/ros2service ros2cli/ros2node ros2cli/ros2run ros2cli/ros2pkg ros2cli/ros2interface \
  ros2cli/ros2lifecycle sros2
ENV := source tools/env.sh
MSG_SOURCES := $(shell find msg -type f -not -path '*/.*' 2>/dev/null)
PKG_SOURCES := package.xml setup.py setup.cfg gamma_net_ros/entry.py $(wildcard launch/*.launch.py config/*.yaml config/*.json resource/*)
PYTEST_ARGS ?=
# A test that failed because a process did not end (a subprocess wait timed out, a launch escalated to
# SIGTERM) runs once more: the middleware's rare shutdown stalls (docs/robustness.md); the log lists
# each rerun (R), and a test that fails twice fails the run. RERUN_ARGS= turns it off.
RERUN_ARGS ?= --reruns 1 --only-rerun 'TimeoutExpired|failed to terminate|processes exited with'
# Test files run side by side on this many pytest-xdist workers (each claims its own ROS_DOMAIN_ID;
# a file's tests stay on one worker, so its module fixtures run once); tests marked `serial` still
# run alone. TEST_WORKERS=0 runs every test in one process. The files are handed out longest first,
# in the order tests/conftest.py sorts them (tests/durations.json), not xdist's by number of tests.
# Three on two cores: a third of two workers' time was tests waiting on real time (robot stand-ins,
# launches), which a third worker fills. A test held past its limit where pytest-timeout cannot end
# it fails with every thread's stack (the hang guard, tests/conftest.py) instead of hanging the run
# (docs/lab-notes/test-suite.md).
TEST_WORKERS ?= 3
DEMO_ARGS ?=

.PHONY: demo demo-setup test test-fast setup lint lock bench clean

demo: demo-setup
	$(ENV) && gamma-net demo --out runs/demo --json runs/demo/demo.json $(DEMO_ARGS)

# The demo starts its nodes itself and needs none of the ROS 2 command-line tools: where there are
# none and no sources to install them from, it goes on without them and says so in one line.
demo-setup: $(BUILD_STAMP) $(WARM_STAMP)
	@if [ -f $(ROS2_TOOLS_STAMP) ] || [ -d "$(ROS2_VENDOR)/launch_ros" ] || ($(ENV) >/dev/null 2>&1 && command -v ros2 >/dev/null \
	    && python -c 'import launch_ros, ros2cli, rosidl_runtime_py, composition_interfaces' 2>/dev/null); then \
	  $(MAKE) --no-print-directory $(ROS2_TOOLS_STAMP); \
	else \
	  echo "ros2 tools: skipped (no ROS 2 here, no sources in ROS2_VENDOR=$(ROS2_VENDOR)); the demo needs none, \
	\`ros2 launch|run|topic\` and \`make test\` do: source a ROS 2 install, or set ROS2_VENDOR to their sources (the \
	$(ROS2_TOOLS_STAMP) rule in the Makefile lists them), then \`make setup\`"; \
	fi

test: setup
	$(ENV) && ruff check . && ruff format --check .
	$(ENV) && python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(RERUN_ARGS) $(PYTEST_ARGS)

# The README's fast tier: units, oracles and one-line refusals, no node and no pipeline (about a minute).
test-fast: setup
	$(ENV) && python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not ros and not slow" $(PYTEST_ARGS)

setup: $(BUILD_STAMP) $(ROS2_TOOLS_STAMP) $(WARM_STAMP)

lint: setup
	$(ENV) && ruff check . && ruff format --check .

bench: setup
	$(ENV) && gamma-net bench all

$(VENV)/bin/python:
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(DEPS_STAMP): requirements.txt constraints.txt tools/fix_ros_cmake.py | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet --upgrade pip==26.3
	$(VENV)/bin/python -m pip install --quiet -r requirements.txt -c constraints.txt
	$(VENV)/bin/python tools/fix_ros_cmake.py
	touch $@

$(ROS2_TOOLS_STAMP): $(DEPS_STAMP) requirements-ros2-tools.txt
	@mkdir -p $(ROS2_TOOLS) && touch $(ROS2_TOOLS)/COLCON_IGNORE
	@# A robot's ROS (apt, sourced) already has them; the copy under build/ is sourced by tools/env.sh.
	if [ ! -f $(ROS2_TOOLS)/install/setup.bash ] && $(ENV) && command -v ros2 >/dev/null \
	    && python -c 'import launch_ros, ros2cli, rosidl_runtime_py, composition_interfaces' 2>/dev/null; then \
	  echo "ros2 tools: using $$(command -v ros2)"; \
	else \
	  [ -d "$(ROS2_VENDOR)/launch_ros" ] || { echo "error: no ROS 2 tools and no sources in ROS2_VENDOR=$(ROS2_VENDOR): source a ROS 2 install, or set ROS2_VENDOR to a folder of their sources ($(ROS2_TOOLS_PIP) and rcl_interfaces); \`make demo\` needs none of them"; exit 1; }; \
	  rm -rf $(ROS2_TOOLS)/src $(ROS2_TOOLS)/build $(ROS2_TOOLS)/install && cp -r "$(ROS2_VENDOR)" $(ROS2_TOOLS)/src; \
	  chmod -R u+w $(ROS2_TOOLS)/src; \
	  $(VENV)/bin/python -m pip install --quiet -r requirements-ros2-tools.txt -c constraints.txt; \
	  (cd $(ROS2_TOOLS)/src && ../../../$(VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation $(addprefix ./,$(ROS2_TOOLS_PIP))); \
	  $(ENV) && colcon --log-base $(ROS2_TOOLS)/log build --base-paths $(ROS2_TOOLS)/src/rcl_interfaces/composition_interfaces \
	    --build-base $(ROS2_TOOLS)/build --install-base $(ROS2_TOOLS)/install --event-handlers console_direct- \
	    --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE=$$(which python); \
	fi
	touch $@

# Editable install into the venv: puts `gamma-net` on the venv's PATH.
$(EDITABLE_STAMP): $(DEPS_STAMP) setup.py setup.cfg
	$(VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(BUILD_STAMP): $(EDITABLE_STAMP) $(MSG_SOURCES) $(PKG_SOURCES)
	@# A data file removed from the sources leaves a dangling symlink that stops colcon.
	@find build install -xtype l -delete 2>/dev/null || true
	$(ENV) && colcon build --base-paths . msg --symlink-install \
	  --event-handlers console_direct- \
	  --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE=$$(which python)
	touch $@

# On an empty cache this compiles for 1 to 4 minutes (2 busy cores); afterwards nodes load their kernels in ~1 s.
$(WARM_STAMP): $(EDITABLE_STAMP) $(KERNEL_SOURCES)
	@mkdir -p build
	$(ENV) && gamma-net warmup
	touch $@

# Regenerate constraints.txt from requirements.txt (and the ROS 2 tools' PyPI needs) in a scratch venv.
lock:
	rm -rf /tmp/gamma-net-lock && $(PYTHON) -m venv /tmp/gamma-net-lock
	/tmp/gamma-net-lock/bin/pip install --quiet --upgrade pip==26.3
	/tmp/gamma-net-lock/bin/pip install --quiet -r requirements.txt -r requirements-ros2-tools.txt
	{ echo "# Full resolved dependency set for requirements.txt (generated by 'make lock')."; \
	  /tmp/gamma-net-lock/bin/pip freeze | grep -v '^gamma'; } > constraints.txt

clean:
	rm -rf build install log
