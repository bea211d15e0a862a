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
CONCS=${CONCS:-10,100,1000}
RUNS=${RUNS:-3}
N=${N:-500000}
BENCH=${BENCH:-$REL/stoa-bench}
HYPER=${HYPER:-$REL/hyper-article}
NGINX=${NGINX:-nginx}
SERVERS=${SERVERS:-stoa-epoll:/article stoa-epoll:/hello/ stoa-poll:/article nginx:/article hyper:/article}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"

PATH=$PATH:/usr/sbin
need taskset "util-linux"
for f in "$BENCH" "$REL/stoa" "$REL/libarticle.so" "$REL/libhello_project.so"; do
    need "$f" "cargo build --release"
done
case " $SERVERS" in *" nginx:"*) need "$NGINX" "apt-get install -y nginx" ;; esac
case " $SERVERS" in
    *" hyper:"*) need "$HYPER" "cargo build --release --manifest-path benches/peers/hyper-article/Cargo.toml --target-dir target" ;;
esac
if ! taskset -c 1 true 2>/dev/null; then
    echo "$(basename "$0"): needs CPUs 0 and 1 (server, load generator)" >&2
    exit 1
fi
ulimit -n "$(ulimit -Hn)"

TMP=$(mktemp -d /tmp/stoa-peers.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/apps" "$TMP/nginx/tmp"
cp "$REL"/lib{article,hello_project}.so "$TMP/apps/"

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_nginx: the config template on a free port; sets SERVER_PID (master),
# SERVER_PORT and CPU_PIDS (master and worker).
start_nginx() {
    local port worker
    for _ in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 40000))
        port_open "$port" && continue
        sed -e "s|@DIR@|$TMP/nginx|g" -e "s|@PORT@|$port|g" \
            "$ROOT/benches/peers/nginx-article.conf" >"$TMP/nginx/nginx.conf"
        taskset -c 0 "$NGINX" -p "$TMP/nginx" -e "$TMP/nginx/error.log" \
            -c "$TMP/nginx/nginx.conf" -g 'daemon off;' 2>"$TMP/server.err" &
        SERVER_PID=$!
        for _ in $(seq 100); do
            worker=$(pgrep -P "$SERVER_PID" | head -1 || true)
            if [ -n "$worker" ] && port_open "$port"; then
                SERVER_PORT=$port CPU_PIDS="$SERVER_PID $worker"
                return 0
            fi
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.1
        done
        stop_server
    done
    echo "nginx did not start:" >&2
    cat "$TMP/server.err" "$TMP/nginx/error.log" >&2 2>/dev/null || true
    exit 1
}

start() {
    case $1 in
        stoa-*) start_stoa "$REL/stoa" "${1#stoa-}" ;;
        hyper) start_server "$HYPER" 127.0.0.1:0 ;;
        nginx) start_nginx; return ;;
        *) echo "unknown server $1" >&2; exit 1 ;;
    esac
    CPU_PIDS=$SERVER_PID
}

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
