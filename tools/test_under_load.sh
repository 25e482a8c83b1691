#!/usr/bin/env bash
# `make test` with busy processes running beside it, as `stress --cpu N` would start them: a user's
# laptop or a CI runner is often that busy, and the tests must still pass (they wait for readiness,
# within bounds scaled by GAMMA_NET_TEST_SLOWDOWN).
#
# Usage: tools/test_under_load.sh [make arguments...]   e.g. PYTEST_ARGS="-k launch"
#   LOAD_PROCESSES  busy processes to start (default: 2 per core); 0 runs `make test` alone.
# Prints one summary line at the end: busy processes, wall time, exit code, load average seen.
set -euo pipefail
cd "$(dirname "$0")/.."

busy=${LOAD_PROCESSES:-$((2 * $(nproc)))}
[[ $busy =~ ^[0-9]+$ ]] || { echo "test_under_load.sh: error: LOAD_PROCESSES must be a count; got '$busy'" >&2; exit 2; }

pids=()
stop_load() {
    # Only the processes started here, by their ids.
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}
trap stop_load EXIT INT TERM

for _ in $(seq 1 "$busy"); do
    nice -n 0 python3 -c 'while True: pass' &
    pids+=("$!")
done

# The load average once a minute: what the tests ran beside (other work on the machine counts too).
loads=$(mktemp)
(while sleep 60; do cut -d' ' -f1 /proc/loadavg >>"$loads"; done) &
sampler=$!
pids+=("$sampler")

start=$(date +%s)
status=0
make test "$@" || status=$?
seconds=$(($(date +%s) - start))
stop_load
range=$(sort -g "$loads" | sed -n '1p;$p' | paste -sd- -)
rm -f "$loads"
echo "test_under_load.sh: make test beside $busy busy processes on $(nproc) cores:" \
    "${seconds} s, exit ${status}; 1-minute load average ${range:-n/a} (sampled each minute)"
exit "$status"
