#!/usr/bin/env bash
# Process mode against thread mode (`--worker-mode process|thread`, the same
# build, the same --workers): server CPU per request, paired. For each
# worker count both hosts run at once (pinned to CPU 0; the idle one sits
# in its wait) and take turns in bursts of BURST keep-alive requests from
# stoa-bench on CPU 1 (thread, process, thread, process, ...), ROUNDS rounds
# per point. CPU is the sum over every process of the server (process mode:
# the supervisor and its workers; /proc/PID/task/*/schedstat, else
# utime+stime). Prints each burst, a markdown table per point (medians, the
# median of the per-round ratios process/thread and their spread) and the
# VmRSS of each process of both hosts when idle (started, nothing served)
# and after the load. The load average is printed at each point, as other
# work on the machine shows in absolute figures (not much in paired ratios).
#
# Usage: benches/worker_modes.sh
#   env: WORKERS ("1 2"), PATHS ("/article /hello/"), CONCS ("100 1000"),
#   ROUNDS (5), BURST (100000), WARMUP (20000 per host and point), POLLER
#   (epoll), STOA (target/release/stoa, serving the apps built beside it)
# With --workers 2 both workers share CPU 0 with each other (the load has
# CPU 1): the figure is the cost of a request with two loops on one core.
# Only 127.0.0.1 is loaded; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORKERS=${WORKERS:-1 2}
PATHS=${PATHS:-/article /hello/}
CONCS=${CONCS:-100 1000}
ROUNDS=${ROUNDS:-5}
BURST=${BURST:-100000}
WARMUP=${WARMUP:-20000}
POLLER=${POLLER:-epoll}
STOA=${STOA:-$ROOT/target/release/stoa}
BENCH=${BENCH:-$ROOT/target/release/stoa-bench}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
need "$BENCH" "cargo build --release"
need "$STOA" "cargo build --release"
need taskset "util-linux"
need ps "procps"
if ! "$STOA" --help | grep -q -- --worker-mode; then
    echo "$STOA has no --worker-mode flag" >&2
    exit 1
fi
TMP=$(mktemp -d /tmp/stoa-worker-modes.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/apps"
cp "$(dirname "$STOA")"/lib{hello_project,article,environ,demo}.so "$TMP/apps/"
ulimit -n "$(ulimit -Hn)"

# rss_lines MODE PID: one "MODE role pid VmRSS-KiB Pss-KiB" line per process
# of the tree (Pss: shared pages split between the processes sharing them).
rss_lines() {
    local mode=$1 root=$2 p role
    for p in $(tree_pids "$root"); do
        role=worker
        if [ "$mode" = process ] && [ "$p" = "$root" ]; then role=supervisor; fi
        [ "$mode" = thread ] && role=host
        echo "$mode $role $p $(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status")" \
            "$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo -)"
    done
}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); $POLLER; bursts of $BURST"
: >"$TMP/results"
for w in $WORKERS; do
    declare -A pid port
    for mode in thread process; do
        start_server "$STOA" --bind 127.0.0.1:0 --apps "$TMP/apps" --poller "$POLLER" \
            --workers "$w" --worker-mode "$mode" --log-level warn
        pid[$mode]=$SERVER_PID port[$mode]=$SERVER_PORT
    done
    sleep 1
    for mode in thread process; do rss_lines "$mode" "${pid[$mode]}"; done >"$TMP/rss-idle-$w"
    for path in $PATHS; do
        for c in $CONCS; do
            for mode in thread process; do
                taskset -c 1 "$BENCH" load -k -t 1 -c "$c" -n "$WARMUP" --max-time 120s \
                    "http://127.0.0.1:${port[$mode]}$path" >/dev/null
            done
            echo "workers=$w $path c=$c: load average $(cut -d' ' -f1-3 /proc/loadavg)"
            for round in $(seq "$ROUNDS"); do
                for mode in thread process; do
                    # shellcheck disable=SC2046 # one argument per PID
                    read -r us rps first _ < <(WARMUP=0 N=$BURST measure \
                        "http://127.0.0.1:${port[$mode]}$path" "$c" $(tree_pids "${pid[$mode]}"))
                    # process mode: the first PID is the supervisor's
                    sup=-
                    [ "$mode" = process ] && sup=${first:-0}
                    echo "  round $round $mode: $us us/req (supervisor $sup), $rps req/s"
                    echo "$w $path $c $round $mode $us $rps $sup" >>"$TMP/results"
                done
            done
        done
    done
    for mode in thread process; do rss_lines "$mode" "${pid[$mode]}"; done >"$TMP/rss-after-$w"
    for mode in thread process; do SERVER_PID=${pid[$mode]} stop_server; done
    unset pid port
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# col W PATH C MODE F: median over the rounds of column F
col() {
    awk -v w="$1" -v p="$2" -v c="$3" -v m="$4" -v f="$5" \
        '$1 == w && $2 == p && $3 == c && $5 == m { print $f }' "$TMP/results" | median
}
# ratios W PATH C: per round, process us/req / thread us/req
ratios() {
    awk -v w="$1" -v p="$2" -v c="$3" '$1 == w && $2 == p && $3 == c {
            if ($5 == "thread") t[$4] = $6; else q[$4] = $6 }
        END { for (r in t) if (t[r] > 0 && r in q) printf "%.4f\n", q[r] / t[r] }' "$TMP/results"
}
echo
echo "| workers | path | conc | thread CPU µs/req | process CPU µs/req | of which supervisor | process/thread (median of $ROUNDS pairs) | lowest | highest | thread req/s | process req/s |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for w in $WORKERS; do
    for path in $PATHS; do
        for c in $CONCS; do
            ratios "$w" "$path" "$c" | sort -n >"$TMP/r"
            printf '| %s | %s | %s | %s | %s | %s | %.3f | %.3f | %.3f | %s | %s |\n' "$w" "$path" "$c" \
                "$(col "$w" "$path" "$c" thread 6)" "$(col "$w" "$path" "$c" process 6)" \
                "$(col "$w" "$path" "$c" process 8)" \
                "$(median <"$TMP/r")" "$(head -1 "$TMP/r")" "$(tail -1 "$TMP/r")" \
                "$(col "$w" "$path" "$c" thread 7)" "$(col "$w" "$path" "$c" process 7)"
        done
    done
done
echo
echo "| workers | mode | process | pid | VmRSS KiB idle | VmRSS KiB after the load | Pss KiB idle | Pss KiB after |"
echo "|---:|---|---|---:|---:|---:|---:|---:|"
for w in $WORKERS; do
    join -j 3 <(sort -k3 "$TMP/rss-idle-$w") <(sort -k3 "$TMP/rss-after-$w") |
        awk -v w="$w" '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", w, $2, $3, $1, $4, $8, $5, $9 }' |
        sort -t"|" -k3,3r -k4,4
done
