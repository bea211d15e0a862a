#!/usr/bin/env bash
# Syscalls per request of one poller: `strace -c -f` attached to every process
# of a one-worker server (the supervisor and its worker, pinned to CPU 0) over N
# keep-alive requests from stoa-bench on CPU 1, after a warm-up of the same
# size. Prints each syscall's count per request (strace's last line: the total).
#
# Usage: benches/syscalls.sh POLLER [CONCURRENCY] [PATH]
#   env: N (requests, default 20000), STOA, BENCH (release binaries)
# Only 127.0.0.1 is loaded; the load is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
POLLER=$1 CONC=${2:-100} URLPATH=${3:-/hello/}
N=${N:-20000}
STOA=${STOA:-$ROOT/target/release/stoa}
BENCH=${BENCH:-$ROOT/target/release/stoa-bench}
command -v strace >/dev/null || { echo "needs strace (apt-get install strace)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/stoa-syscalls.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/apps"
cp "$ROOT"/target/release/lib{hello_project,article}.so "$TMP/apps/"
PORT=$((39000 + RANDOM % 1000))
taskset -c 0 "$STOA" --bind "127.0.0.1:$PORT" --apps "$TMP/apps" --poller "$POLLER" \
    --workers 1 --log-level warn >/dev/null 2>&1 &
SERVER=$!
sleep 1
load=(taskset -c 1 "$BENCH" load -k -t 1 -c "$CONC" --max-time 60s -n "$N"
    "http://127.0.0.1:$PORT$URLPATH")
"${load[@]}" >/dev/null
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
attach=()
for pid in $(tree_pids "$SERVER"); do attach+=(-p "$pid"); done
strace -c -f "${attach[@]}" -o "$TMP/strace" 2>/dev/null &
TRACER=$!
sleep 1
"${load[@]}" >"$TMP/load"
sleep 0.5
kill -INT "$TRACER"
wait "$TRACER" || true
echo "$POLLER c=$CONC $URLPATH: $(grep -E '^complete' "$TMP/load")"
# strace -c columns: % time, seconds, usecs/call, calls, [errors,] syscall.
awk -v n="$N" '$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ {
    printf "%-16s %8d  %.3f/request\n", $NF, $4, $4 / n }' "$TMP/strace"
