#!/usr/bin/env bash
# Server CPU per request of Stoa against nginx and hyper, same machine, one
# run (issue 12). For each round (RUNS), concurrency (CONCS) and server
# (SERVERS), in that nesting so the servers take turns: a fresh server
# pinned to CPU 0, stoa-bench on CPU 1 (one thread, keep-alive), WARMUP
# requests, then N requests; the server's CPU time over those N (schedstat
# ns of every thread, else utime + stime ticks) per answered request, and
# req/s. Prints each point, then a markdown table of medians with the CPU
# ratios against nginx and hyper at the same concurrency (below 1: less
# CPU than the peer). nginx counts master + worker.
#
# Usage: benches/peers/cpu_vs_peers.sh
#   env: CONCS (10,100,1000), RUNS (3), N (500000), WARMUP (20000),
#   MAX_TIME (per load run, 120s), SERVERS (KIND:PATH list, KIND one of
#   stoa-epoll, stoa-poll, stoa-select, nginx, hyper), REL (target/release)
# Needs: cargo build --release; the hyper peer built with
#   cargo build --release --manifest-path benches/peers/hyper-article/Cargo.toml --target-dir target
# and nginx. Only 127.0.0.1; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${REL:-$ROOT/target/release}
RUNS=${RUNS:-3}
N=${N:-500000}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
# shellcheck source=benches/peers/peers_lib.sh
. "$ROOT/benches/peers/peers_lib.sh"
peers_setup stoa-peers

src=ticks
[ -r "/proc/self/schedstat" ] && src="schedstat ns"
echo "load generator: stoa-bench load -k -t 1 ($BENCH) on CPU 1; server on CPU 0"
echo "per point: ${WARMUP:-20000} warm-up requests, then N=$N; server CPU from $src; RUNS=$RUNS"

: >"$TMP/results"
for run in $(seq "$RUNS"); do
    for c in ${CONCS//,/ }; do
        for s in $SERVERS; do
            kind=${s%%:*} path=${s#*:}
            start "$kind"
            # shellcheck disable=SC2086 # one argument per PID
            measure "http://127.0.0.1:$SERVER_PORT$path" "$c" $CPU_PIDS >"$TMP/m"
            stop_server
            read -r us rps split <"$TMP/m" || true
            echo "run $run c=$c $kind $path: $us us/req, $rps req/s${split:+ (master, worker: $split)}"
            echo "$kind $path $c $us $rps" >>"$TMP/results"
        done
    done
done

# col KIND PATH CONC FIELD: the median of one column over the rounds.
col() { awk -v k="$1 $2 $3" -v f="$4" '$1 " " $2 " " $3 == k { print $f }' "$TMP/results" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b > 0) printf "%.2f", a / b; else printf "-" }'; }

echo
echo "| server | path | conc | CPU µs/req (median) | req/s (median) | CPU vs nginx | CPU vs hyper |"
echo "|---|---|---:|---:|---:|---:|---:|"
for c in ${CONCS//,/ }; do
    ng=$(col nginx /article "$c" 4)
    hy=$(col hyper /article "$c" 4)
    for s in $SERVERS; do
        kind=${s%%:*} path=${s#*:}
        us=$(col "$kind" "$path" "$c" 4)
        echo "| $kind | $path | $c | $us | $(col "$kind" "$path" "$c" 5) | $(ratio "$us" "$ng") | $(ratio "$us" "$hy") |"
    done
done
