#!/bin/bash
# The in-process HMASD update time (python -m bench.experiments.hmasd_throughput, default settings,
# one thread; at commits before it moved there, python -m rl_system.algos.hmasd.bench) at several
# commits, alternating between them for REPEATS passes so that a shared machine's drift spreads
# over every commit instead of favouring one:
#
#     bench/experiments/hmasd_update_commits.sh [REPEATS] COMMIT...
#
# Each commit is checked out as a detached worktree under a temporary folder (removed at the end).
set -euo pipefail
repeats=2
if [[ ${1:-} =~ ^[0-9]+$ ]]; then repeats=$1; shift; fi
(( $# )) || { echo "usage: $0 [REPEATS] COMMIT..." >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'for c in "$@"; do git -C "$root" worktree remove --force "$tmp/$c" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
for c in "$@"; do git -C "$root" worktree add --quiet -f --detach "$tmp/$c" "$c" >/dev/null; done
for ((rep = 1; rep <= repeats; rep++)); do
  for c in "$@"; do
    module=bench.experiments.hmasd_throughput
    [[ -f "$tmp/$c/bench/experiments/hmasd_throughput.py" ]] || module=rl_system.algos.hmasd.bench
    line=$(cd "$tmp/$c" && PYTHONPATH="$tmp/$c" timeout 300 python -m "$module" --repeats 3 | grep update)
    echo "$rep $c $line"
  done
done
