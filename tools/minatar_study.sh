#!/usr/bin/env bash
# The Atari study on MinAtar at the scale of docs/results.md ("MinAtar"), one game per core:
#
#   source tools/env.sh && tools/minatar_study.sh [OUT] [GAME ...]
#
# OUT defaults to runs/minatar, the games to Breakout and Space Invaders. Each game runs its
# whole chain (agent, recording, evaluation points, Γ-nets, figures) in one process at a time,
# the games side by side; every command is the one docs/results.md shows, and its wall time is
# appended to OUT/GAME/times.tsv. A command whose output is already complete continues or is
# skipped by the command itself, so running this again resumes a stopped study.
# The counts (and why they differ from the paper's) are in config/minatar.yaml.
set -euo pipefail

OUT=${1:-runs/minatar}
shift || true
GAMES=("$@")
[ ${#GAMES[@]} -gt 0 ] || GAMES=(minatar-breakout minatar-space-invaders)

FRAMES=${FRAMES:-250000}        # agent frames (MinAtar's DQN: 5M; its learning curves, see docs/results.md)
TRANSITIONS=${TRANSITIONS:-45000}  # recorded and trained on: 10,000 updates after the warm-up (paper: 5M)
EPISODES=${EPISODES:-}          # episodes the evaluation points come from (default: per game, below)
ROLLOUTS=${ROLLOUTS:-30}        # Monte-Carlo rollouts per point (paper: 1000)
SEEDS=${SEEDS:-3}               # per series (paper: 6)
# Γ-nets' step size: the paper's 6.25e-5 is for 1.25M updates; these runs make ~14k, so MinAtar's
# own DQN step size, 4x larger, lets the error curves flatten within them (docs/results.md shows them).
STEP_SIZE=${STEP_SIZE:-2.5e-4}
TAUS="1 1.5 2 3.5 5 7.5 10 15 20 30 40 50 60 70 80 90 100"
export OMP_NUM_THREADS=1        # one core per game

timed() {  # timed GAME_DIR STAGE COMMAND...: run it, append "stage<TAB>seconds" to the game's times
    local dir=$1 stage=$2
    shift 2
    local began=$SECONDS
    "$@"
    printf '%s\t%d\n' "$stage" $((SECONDS - began)) >> "$dir/times.tsv"
}

chain() {
    local game=$1 dir=$OUT/$1 episodes=$EPISODES
    if [ -z "$episodes" ]; then
        # About 60-200 points each: Breakout's greedy episodes are short (4 gave 14 points), Space Invaders' longer.
        case $game in *breakout) episodes=24 ;; *) episodes=12 ;; esac
    fi
    mkdir -p "$dir"
    timed "$dir" agent gamma-net atari train-agent --game "$game" --frames "$FRAMES" --out "$dir/agent" \
        --no-progress --json "$dir/agent.json"
    timed "$dir" record gamma-net atari record --game "$game" --steps "$TRANSITIONS" --out "$dir/rec" \
        --policy "$dir/agent/network.pt" --no-progress
    if [ ! -f "$dir/pts/returns.npz" ]; then
        timed "$dir" points gamma-net atari points --game "$game" --episodes "$episodes" --rollouts "$ROLLOUTS" \
            --out "$dir/pts" --policy "$dir/agent/network.pt" --taus $TAUS --workers 0 --no-progress \
            --json "$dir/points.json"
    fi
    timed "$dir" train gamma-net atari train --params config/minatar.yaml --shards "$dir/rec" --points "$dir/pts" \
        --out "$dir/study" --series all --seeds "$SEEDS" --ensemble 14 --workers 0 --no-progress \
        --set step_size="$STEP_SIZE" \
        --json "$dir/train.json"
    timed "$dir" evaluate gamma-net atari evaluate --run "$dir/study" --points "$dir/pts" \
        --out "$dir/study/figures" --json "$dir/evaluate.json"
}

pids=()
for game in "${GAMES[@]}"; do
    mkdir -p "$OUT/$game"
    chain "$game" > "$OUT/$game/log.txt" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
