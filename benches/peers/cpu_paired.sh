#!/usr/bin/env bash
# Server CPU per request of Stoa against nginx and hyper, paired. Every
# server of SERVERS runs at once (all pinned to CPU 0; each sits idle in
# its wait while another is loaded) and they take turns in short bursts of
# BURST keep-alive requests from stoa-bench on CPU 1, for ROUNDS rounds. On
# a machine whose speed drifts by several percent over seconds (a shared
# VM), a slow spell then falls on every server alike. Printed per point:
# the median over the rounds of each server's µs of CPU per request (its
# threads' schedstat ns, nginx's master and worker), req/s, and the paired
# ratios: the median over the rounds of (this server's CPU per request) /
# (the peer's in the same round), against nginx, hyper and Stoa's epoll
# /article.
#
# Usage: benches/peers/cpu_paired.sh
#   env: CONCS (10,100,1000), ROUNDS (15), BURST (100000 requests, about
#   0.7 s), WARMUP (20000, once per server and concurrency), MAX_TIME,
#   SERVERS (KIND:PATH list as for cpu_vs_peers.sh), REL (target/release)
# Needs what benches/peers/cpu_vs_peers.sh needs. Only 127.0.0.1; every run
# is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${REL:-$ROOT/target/release}
ROUNDS=${ROUNDS:-15}
BURST=${BURST:-100000}
WARMUP=${WARMUP:-20000}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
# shellcheck source=benches/peers/peers_lib.sh
. "$ROOT/benches/peers/peers_lib.sh"
peers_setup stoa-paired

read -ra LIST <<<"$SERVERS"
echo "paired: ${#LIST[@]} servers at once on CPU 0, bursts of $BURST requests in turn, $ROUNDS rounds; stoa-bench load -k -t 1 on CPU 1"
: >"$TMP/results"
for c in ${CONCS//,/ }; do
    pids=() ports=() cpus=()
    for s in "${LIST[@]}"; do
        start "${s%%:*}"
        pids+=("$SERVER_PID") ports+=("$SERVER_PORT") cpus+=("$CPU_PIDS")
        taskset -c 1 "$BENCH" load -k -t 1 -c "$c" -n "$WARMUP" \
            "http://127.0.0.1:$SERVER_PORT${s#*:}" >/dev/null
    done
    for round in $(seq "$ROUNDS"); do
        for i in "${!LIST[@]}"; do
            s=${LIST[$i]}
            # shellcheck disable=SC2086 # one argument per PID
            read -r us rps _ < <(WARMUP=0 N=$BURST measure \
                "http://127.0.0.1:${ports[$i]}${s#*:}" "$c" ${cpus[$i]})
            echo "round $round c=$c $s: $us us/req, $rps req/s"
            echo "$c $round $s $us $rps" >>"$TMP/results"
        done
    done
    for pid in "${pids[@]}"; do SERVER_PID=$pid stop_server; done
done

# median over the rounds of one server's column F at concurrency C
col() { awk -v c="$1" -v s="$2" -v f="$3" '$1 == c && $3 == s { print $f }' "$TMP/results" | median; }
# paired C S PEER: median over the rounds of S's CPU per request / PEER's
paired() {
    awk -v c="$1" -v s="$2" -v p="$3" '$1 == c && $3 == s { a[$2] = $4 }
        $1 == c && $3 == p { b[$2] = $4 }
        END { for (r in a) if (b[r] > 0) print a[r] / b[r] }' "$TMP/results" | median |
        awk '{ if ($1 != "") printf "%.3f", $1; else printf "-" }'
}
echo
echo "| server | path | conc | CPU µs/req (median) | req/s (median) | vs nginx | vs hyper | vs stoa-epoll /article |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for c in ${CONCS//,/ }; do
    for s in "${LIST[@]}"; do
        echo "| ${s%%:*} | ${s#*:} | $c | $(col "$c" "$s" 4) | $(col "$c" "$s" 5) |" \
            "$(paired "$c" "$s" nginx:/article) | $(paired "$c" "$s" hyper:/article) |" \
            "$(paired "$c" "$s" stoa-epoll:/article) |"
    done
done
