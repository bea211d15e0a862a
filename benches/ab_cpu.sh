#!/usr/bin/env bash
# Server CPU per request of two stoa builds, interleaved (A, B, A, B, ...):
# the figure that decides on a 2-core machine where the load generator is the
# limit. Each point: a fresh server pinned to CPU 0, stoa-bench on CPU 1, a
# warm-up, then N keep-alive requests; the server's CPU time over those N
# requests (schedstat nanoseconds, else utime + stime ticks), divided by the
# requests answered. Prints each run and the medians, and the ratio B/A.
#
# Usage: benches/ab_cpu.sh STOA_A STOA_B [PATH] [CONCURRENCY] [POLLER]
#   Each binary serves the apps built beside it (lib*.so in its directory),
#   so two builds of different app-api versions compare, each with its own.
#   env: N (requests per point, default 500000: ~2 s of server CPU, so even
#   10 ms ticks round by under 1%), RUNS (default 3), BENCH (stoa-bench),
#   POLLER_B (B's poller, default POLLER: one binary twice with two pollers
#   compares the backends), MODE (keepalive, the default, or close: a new
#   connection per request)
# Only 127.0.0.1 is loaded; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$1 B=$2 URLPATH=${3:-/article} CONC=${4:-100} POLLER=${5:-epoll}
POLLER_B=${POLLER_B:-$POLLER}
N=${N:-500000}
RUNS=${RUNS:-3}
BENCH=${BENCH:-$ROOT/target/release/stoa-bench}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
two_builds stoa-abcpu "$A" "$B"

# point BINARY POLLER SIDE -> prints µs of server CPU per request
point() {
    APPS="$TMP/apps-$3" start_stoa "$1" "$2"
    measure "http://127.0.0.1:$SERVER_PORT$URLPATH" "$CONC" "$SERVER_PID" | cut -d' ' -f1
    stop_server
}

: >"$TMP/a"
: >"$TMP/b"
for run in $(seq "$RUNS"); do
    a=$(point "$A" "$POLLER" A)
    b=$(point "$B" "$POLLER_B" B)
    echo "run $run: A $a us/req  B $b us/req"
    echo "$a" >>"$TMP/a"
    echo "$b" >>"$TMP/b"
done
ma=$(median <"$TMP/a")
mb=$(median <"$TMP/b")
echo "median: A $ma  B $mb  ratio B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.3f", b / a }')"
