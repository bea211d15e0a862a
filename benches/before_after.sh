#!/usr/bin/env bash
# Server CPU per request of two stoa builds at every keep-alive and close
# point of the committed backend sweep (`benches/results/compare-quick.md`:
# select, poll and epoll; /article and /hello/; c=1, 10, 100, 1000), paired:
# for each backend both builds run at once (pinned to CPU 0, each serving
# the apps built beside it, one worker; the idle one sits in its wait) and
# take turns in short bursts from stoa-bench on CPU 1, ROUNDS rounds per
# point, so a slow spell of the machine falls on both alike. Prints a
# markdown table per point: each build's median µs of CPU per request and
# the median over the rounds of the per-round ratio NEW/OLD, then the
# lowest and highest ratio.
#
# Usage: benches/before_after.sh OLD_STOA NEW_STOA
#   env: POLLERS (default "select poll epoll"), PATHS ("/article /hello/"),
#   MODES ("keepalive close"), CONCS ("1 10 100 1000"), ROUNDS (7),
#   BURST (requests per keep-alive burst, 60000; a quarter of it at c=1
#   and per connection), WARMUP (20000 per build, backend and point)
# Only 127.0.0.1 is loaded; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=$1 NEW=$2
POLLERS=${POLLERS:-select poll epoll}
PATHS=${PATHS:-/article /hello/}
MODES=${MODES:-keepalive close}
CONCS=${CONCS:-1 10 100 1000}
ROUNDS=${ROUNDS:-7}
BURST=${BURST:-60000}
BENCH=${BENCH:-$ROOT/target/release/stoa-bench}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
two_builds stoa-before-after "$OLD" "$NEW"
ulimit -n "$(ulimit -Hn)"

# burst URL CONC PID MODE N: µs of CPU per request over N requests of the
# PID and every process under it (in process mode, the default, the worker
# serves and the supervisor waits)
burst() {
    # shellcheck disable=SC2046 # one word per pid
    MODE=$4 N=$5 WARMUP=0 measure "$1" "$2" $(tree_pids "$3") | cut -d' ' -f1
}

echo "| backend | path | mode | conc | old CPU µs/req | new CPU µs/req | new/old (paired) |"
echo "|---|---|---|---:|---:|---:|---:|"
: >"$TMP/ratios"
for poller in $POLLERS; do
    APPS="$TMP/apps-A" start_stoa "$OLD" "$poller"
    old_pid=$SERVER_PID old_port=$SERVER_PORT
    APPS="$TMP/apps-B" start_stoa "$NEW" "$poller"
    new_pid=$SERVER_PID new_port=$SERVER_PORT
    for path in $PATHS; do
        for mode in $MODES; do
            for conc in $CONCS; do
                n=$BURST
                if [ "$mode" = close ] || [ "$conc" = 1 ]; then n=$((BURST / 4)); fi
                burst "http://127.0.0.1:$old_port$path" "$conc" "$old_pid" "$mode" "${WARMUP:-20000}" >/dev/null
                burst "http://127.0.0.1:$new_port$path" "$conc" "$new_pid" "$mode" "${WARMUP:-20000}" >/dev/null
                : >"$TMP/point"
                for _ in $(seq "$ROUNDS"); do
                    o=$(burst "http://127.0.0.1:$old_port$path" "$conc" "$old_pid" "$mode" "$n")
                    w=$(burst "http://127.0.0.1:$new_port$path" "$conc" "$new_pid" "$mode" "$n")
                    echo "$o $w" >>"$TMP/point"
                done
                mo=$(cut -d' ' -f1 "$TMP/point" | median)
                mn=$(cut -d' ' -f2 "$TMP/point" | median)
                r=$(awk '{ printf "%.4f\n", $2 / $1 }' "$TMP/point" | median)
                echo "$r" >>"$TMP/ratios"
                printf '| %s | %s | %s | %s | %s | %s | %.3f |\n' \
                    "$poller" "$path" "$mode" "$conc" "$mo" "$mn" "$r"
            done
        done
    done
    SERVER_PID=$old_pid stop_server
    SERVER_PID=$new_pid stop_server
done
sort -n "$TMP/ratios" | awk 'NR == 1 { lo = $1 } { hi = $1 }
    END { printf "\nnew/old: lowest %.3f, highest %.3f, over %d points\n", lo, hi, NR }'
