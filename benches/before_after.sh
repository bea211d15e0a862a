#!/usr/bin/env bash
# Server CPU per request of two stoa builds at every keep-alive and close
# point of the committed backend sweep (`benches/results/compare-quick.md`:
# select, poll and epoll; /hello/ and /article; c=1, 10, 100, 1000), each
# point measured by benches/ab_cpu.sh (the two builds interleaved, each with
# the apps built beside it, server on CPU 0, stoa-bench on CPU 1, median of
# RUNS). Prints a markdown table with the ratio NEW/OLD per point and the
# smallest and largest ratio.
#
# Usage: benches/before_after.sh OLD_STOA NEW_STOA
#   env: POLLERS (default "select poll epoll"), PATHS ("/article /hello/"),
#   MODES ("keepalive close"), CONCS ("1 10 100 1000"), RUNS (default 3),
#   N_KEEPALIVE (requests per keep-alive point, default 300000; 60000 at
#   c=1), N_CLOSE (per close point, default 60000)
# Only 127.0.0.1 is loaded; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OLD=$1 NEW=$2
POLLERS=${POLLERS:-select poll epoll}
PATHS=${PATHS:-/article /hello/}
MODES=${MODES:-keepalive close}
CONCS=${CONCS:-1 10 100 1000}
export RUNS=${RUNS:-3}

echo "| backend | path | mode | conc | old CPU µs/req | new CPU µs/req | new/old |"
echo "|---|---|---|---:|---:|---:|---:|"
ratios=()
for poller in $POLLERS; do
    for path in $PATHS; do
        for mode in $MODES; do
            for conc in $CONCS; do
                if [ "$mode" = close ]; then
                    n=${N_CLOSE:-60000} warm=5000
                elif [ "$conc" = 1 ]; then
                    n=60000 warm=5000
                else
                    n=${N_KEEPALIVE:-300000} warm=20000
                fi
                line=$(N=$n WARMUP=$warm MODE=$mode "$ROOT/benches/ab_cpu.sh" \
                    "$OLD" "$NEW" "$path" "$conc" "$poller" | tail -1)
                read -r old new ratio < <(awk '{ print $3, $5, $8 }' <<<"$line")
                ratios+=("$ratio")
                echo "| $poller | $path | $mode | $conc | $old | $new | $ratio |"
            done
        done
    done
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '
    NR == 1 { lo = $1 } { hi = $1 }
    END { printf "\nratio new/old: lowest %s, highest %s, over %d points\n", lo, hi, NR }'
