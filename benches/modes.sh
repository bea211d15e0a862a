#!/usr/bin/env bash
# Issue 16's three I/O modes on the same responder (target/release/stoa-modes:
# epoll, io_uring readiness, io_uring completion): syscalls per request
# (`strace -c -f` attached over N keep-alive requests after a warm-up) and
# server CPU µs per request (schedstat over N requests, modes interleaved,
# median of RUNS). Server pinned to CPU 0, stoa-bench on CPU 1.
#
# Usage: benches/modes.sh [CONCURRENCY...]   (default: 100 1000)
#   env: N (CPU requests per point, default 300000), SYS_N (strace requests,
#   default 20000), RUNS (default 3), MODES (default: epoll uring-poll
#   uring-completion uring-completion-plain), BENCH, MODES_BIN
# Only 127.0.0.1 is loaded; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONCS=("${@:-100}")
[ $# -gt 0 ] || CONCS=(100 1000)
N=${N:-300000}
SYS_N=${SYS_N:-20000}
RUNS=${RUNS:-3}
read -r -a MODES <<<"${MODES:-epoll uring-poll uring-completion uring-completion-plain}"
BENCH=${BENCH:-$ROOT/target/release/stoa-bench}
MODES_BIN=${MODES_BIN:-$ROOT/target/release/stoa-modes}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
need "$BENCH" "cargo build --release"
need "$MODES_BIN" "cargo build --release -p stoa-bench"
need strace "apt-get install strace"
need taskset "util-linux"
TMP=$(mktemp -d /tmp/stoa-modes.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; cat "$TMP/server.err" >&2 2>/dev/null; rm -rf "$TMP"' EXIT

# syscalls MODE CONC: total syscalls per request, then the main ones.
syscalls() {
    start_server "$MODES_BIN" "$1"
    local url="http://127.0.0.1:$SERVER_PORT/hello/"
    local load=(taskset -c 1 "$BENCH" load -k -t 1 -c "$2" --max-time 60s -n "$SYS_N" "$url")
    "${load[@]}" >/dev/null
    strace -c -f -p "$SERVER_PID" -o "$TMP/strace" 2>/dev/null &
    local tracer=$!
    sleep 1
    "${load[@]}" >"$TMP/load"
    sleep 0.5
    kill -INT "$tracer"
    wait "$tracer" || true
    stop_server
    # strace -c columns: % time, seconds, usecs/call, calls, [errors,] syscall.
    awk -v n="$SYS_N" '$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {
        t += $4; if ($4 / n >= 0.001) s = s sprintf(" %s %.3f", $NF, $4 / n) }
        END { printf "%.3f (%s )\n", t / n, s }' "$TMP/strace"
}

for conc in "${CONCS[@]}"; do
    for mode in "${MODES[@]}"; do
        echo "syscalls/request $mode c=$conc: $(syscalls "$mode" "$conc")"
    done
done

for conc in "${CONCS[@]}"; do
    for mode in "${MODES[@]}"; do : >"$TMP/cpu-$mode"; done
    for run in $(seq "$RUNS"); do
        for mode in "${MODES[@]}"; do
            start_server "$MODES_BIN" "$mode"
            r=$(measure "http://127.0.0.1:$SERVER_PORT/hello/" "$conc" "$SERVER_PID")
            stop_server
            echo "run $run $mode c=$conc: ${r% *} us/req, ${r#* } req/s"
            echo "${r% *}" >>"$TMP/cpu-$mode"
        done
    done
    for mode in "${MODES[@]}"; do
        echo "median cpu us/request $mode c=$conc: $(median <"$TMP/cpu-$mode")"
    done
done
