#!/usr/bin/env bash
# Server CPU per request of two stoa builds, interleaved (A, B, A, B, ...):
# the figure that decides on a 2-core machine where the load generator is the
# limit. Each point: a fresh server pinned to CPU 0, stoa-bench on CPU 1, a
# warm-up, then N keep-alive requests; the server's utime + stime from
# /proc/PID/stat over those N requests, divided by N. Prints each run and the
# medians, and the ratio B/A.
#
# Usage: benches/ab_cpu.sh STOA_A STOA_B [PATH] [CONCURRENCY] [POLLER]
#   env: N (requests per point, default 500000: ~2 s of server CPU, so the
#   10 ms clock tick rounds by under 1%), RUNS (default 3), BENCH (stoa-bench)
# Only 127.0.0.1 is loaded; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=$1 B=$2 URLPATH=${3:-/article} CONC=${4:-100} POLLER=${5:-epoll}
N=${N:-500000}
RUNS=${RUNS:-3}
BENCH=${BENCH:-$ROOT/target/release/stoa-bench}
TMP=$(mktemp -d /tmp/stoa-abcpu.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/apps"
cp "$ROOT"/target/release/lib{hello_project,article,environ,demo}.so "$TMP/apps/"
TICK=$(getconf CLK_TCK)

# point BINARY -> prints µs of server CPU per request
point() {
    taskset -c 0 "$1" --bind 127.0.0.1:0 --apps "$TMP/apps" --poller "$POLLER" \
        --workers 1 --log-level warn >"$TMP/out" 2>"$TMP/err" &
    local pid=$! port=""
    for _ in $(seq 100); do
        port=$(sed -n 's/^listening on http:\/\/127.0.0.1://p' "$TMP/out")
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "$1 did not start" >&2; cat "$TMP/err" >&2; exit 1; }
    local url="http://127.0.0.1:$port$URLPATH"
    taskset -c 1 "$BENCH" load -k -t 1 -c "$CONC" -n 20000 "$url" >/dev/null
    local before after
    before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    taskset -c 1 "$BENCH" load -k -t 1 -c "$CONC" -n "$N" "$url" >"$TMP/load"
    after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    if grep '^errors:' "$TMP/load" | grep -qE ' [1-9]'; then
        grep '^errors:' "$TMP/load" >&2
    fi
    awk -v t=$((after - before)) -v hz="$TICK" -v n="$N" 'BEGIN { printf "%.3f\n", t / hz * 1e6 / n }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

: >"$TMP/a"
: >"$TMP/b"
for run in $(seq "$RUNS"); do
    a=$(point "$A")
    b=$(point "$B")
    echo "run $run: A $a us/req  B $b us/req"
    echo "$a" >>"$TMP/a"
    echo "$b" >>"$TMP/b"
done
ma=$(median <"$TMP/a")
mb=$(median <"$TMP/b")
echo "median: A $ma  B $mb  ratio B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.3f", b / a }')"
