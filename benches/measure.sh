#!/usr/bin/env bash
# Reproduces the peer comparisons of benches/RESULTS.md on this machine:
# stoa-bench against wrk and ab on the same server and point, Stoa (epoll)
# against nginx, the three backends, and the idle-connections scenario.
#
# Servers run on CPU 0, every load tool on CPU 1. Each figure is the median
# of RUNS runs, taken in turns (A, B, A, B, ...) so that a slow spell on the
# machine hits both sides of a ratio; server and client CPU time per request
# are reported beside req/s, as they stay put when the machine is shared. Only 127.0.0.1 is loaded; every load
# is bounded in requests or seconds; only the PIDs started here are stopped.
#
# Needs: cargo build --release; wrk, ab (apache2-utils) and nginx installed.
# Usage: benches/measure.sh [SECTION...]   sections: tools nginx backends idle
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REL=${REL:-$ROOT/target/release}
STOA=${STOA:-$REL/stoa}
BENCH=${BENCH:-$REL/stoa-bench}
RUNS=${RUNS:-3}
DUR=${DUR:-10}
SRV_CPU=${SRV_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
SECTIONS=${*:-tools nginx backends idle}
TMP=$(mktemp -d /tmp/stoa-measure.XXXXXX)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    sleep 0.5
    rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/apps"
cp "$REL"/lib{hello_project,article,environ,demo}.so "$TMP/apps/"

# start_stoa POLLER -> sets STOA_PID, STOA_PORT
start_stoa() {
    taskset -c "$SRV_CPU" "$STOA" --bind 127.0.0.1:0 --apps "$TMP/apps" --poller "$1" \
        --log-level warn >"$TMP/stoa-$1.out" 2>"$TMP/stoa-$1.err" &
    STOA_PID=$!
    PIDS+=("$STOA_PID")
    for _ in $(seq 100); do
        grep -q '^listening on' "$TMP/stoa-$1.out" 2>/dev/null && break
        sleep 0.1
    done
    STOA_PORT=$(sed -n 's/^listening on http:\/\/127.0.0.1://p' "$TMP/stoa-$1.out")
    [ -n "$STOA_PORT" ] || { echo "stoa --poller $1 did not start" >&2; cat "$TMP/stoa-$1.err" >&2; exit 1; }
}

stop() {
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# start_nginx -> sets NGINX_PID (master), NGINX_WORKER, NGINX_PORT
start_nginx() {
    NGINX_PORT=${NGINX_PORT:-18080}
    mkdir -p "$TMP/nginx/tmp"
    cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
worker_rlimit_nofile 30000;
events { worker_connections 20000; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/tmp/body;
    proxy_temp_path $TMP/nginx/tmp/proxy;
    fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
    uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
    scgi_temp_path $TMP/nginx/tmp/scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=4096;
        location / { return 200 "Hello World!"; }
    }
}
EOF
    taskset -c "$SRV_CPU" nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" &
    NGINX_PID=$!
    PIDS+=("$NGINX_PID")
    for _ in $(seq 50); do
        NGINX_WORKER=$(pgrep -P "$NGINX_PID" | head -1 || true)
        [ -n "$NGINX_WORKER" ] && curl -fs "http://127.0.0.1:$NGINX_PORT/" >/dev/null && break
        sleep 0.1
    done
}

# run_one TOOL URL CONNS SERVER_PID: one bounded run; prints
# "req/s server-CPU-us/request client-CPU-us/request". CPU times are
# utime+stime from /proc (server) and /usr/bin/time (client): unlike req/s
# they hardly move when other work shares the machine.
run_one() {
    local tool=$1 url=$2 c=$3 pid=$4 out t0 t1 rps n
    t0=$(ticks "$pid")
    case $tool in
    wrk) out=$(taskset -c "$LOAD_CPU" /usr/bin/time -f '%U %S' -o "$TMP/time" wrk -t1 -c"$c" -d"${DUR}s" "$url")
        rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out"); n=$(awk '/requests in/ {print $1}' <<<"$out") ;;
    ab) out=$(taskset -c "$LOAD_CPU" /usr/bin/time -f '%U %S' -o "$TMP/time" ab -q -n 20000 -c "$c" "$url")
        rps=$(awk '/^Requests per second/ {print $4}' <<<"$out"); n=$(awk '/^Complete requests/ {print $3}' <<<"$out") ;;
    sb-ka) out=$(/usr/bin/time -f '%U %S' -o "$TMP/time" "$BENCH" load --cpus "$LOAD_CPU" -k -c "$c" -d "${DUR}s" "$url")
        rps=$(awk '/^requests\/s/ {print $2}' <<<"$out"); n=$(awk '/^complete/ {print $2}' <<<"$out") ;;
    sb-close) out=$(/usr/bin/time -f '%U %S' -o "$TMP/time" "$BENCH" load --cpus "$LOAD_CPU" -c "$c" -n 20000 "$url")
        rps=$(awk '/^requests\/s/ {print $2}' <<<"$out"); n=$(awk '/^complete/ {print $2}' <<<"$out") ;;
    esac
    t1=$(ticks "$pid")
    awk -v r="$rps" -v n="$n" -v dt=$((t1 - t0)) -v hz="$HZ" -v c="$(cat "$TMP/time")" 'BEGIN {
        split(c, u, " "); printf "%.0f %.2f %.2f\n", r, dt / hz * 1e6 / n, (u[1] + u[2]) * 1e6 / n }'
}

HZ=$(getconf CLK_TCK)
ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
col() { awk -v k="$1" '{print $k}' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# pair POINT NAME_A "TOOL URL CONNS PID" NAME_B "TOOL URL CONNS PID": RUNS runs
# of each in turns; medians of req/s, server and client CPU per request.
pair() {
    local point=$1 na=$2 ca=$3 nb=$4 cb=$5 ra="" rb=""
    for _ in $(seq "$RUNS"); do
        ra+="$(run_one $ca)"$'\n'; sleep 1
        rb+="$(run_one $cb)"$'\n'; sleep 1
    done
    local a1 a2 a3 b1 b2 b3
    a1=$(col 1 <<<"${ra%$'\n'}"); a2=$(col 2 <<<"${ra%$'\n'}"); a3=$(col 3 <<<"${ra%$'\n'}")
    b1=$(col 1 <<<"${rb%$'\n'}"); b2=$(col 2 <<<"${rb%$'\n'}"); b3=$(col 3 <<<"${rb%$'\n'}")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n' "$point" "$na" "$a1" "$a2" "$a3" \
        "$nb" "$b1" "$b2" "$b3" "$(awk -v a="$a1" -v b="$b1" 'BEGIN {print a / b}')" \
        "$(awk -v a="$a2" -v b="$b2" 'BEGIN {print a / b}')"
    echo "runs $na: $(tr '\n' ';' <<<"${ra%$'\n'}") $nb: $(tr '\n' ';' <<<"${rb%$'\n'}")" >&2
}

header() {
    echo
    echo "### $1"
    echo
    echo "| point | A | req/s | server CPU us/req | client CPU us/req | B | req/s | server CPU us/req | client CPU us/req | req/s A/B | server CPU A/B |"
    echo "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"
}

for section in $SECTIONS; do
    case $section in
    tools)
        start_nginx
        start_stoa epoll
        header "stoa-bench against wrk and ab (same server, same point)"
        for srv in "nginx http://127.0.0.1:$NGINX_PORT/ $NGINX_WORKER" "stoa-epoll http://127.0.0.1:$STOA_PORT/hello/ $STOA_PID"; do
            set -- $srv
            pair "$1 keep-alive c=100 ${DUR}s" stoa-bench "sb-ka $2 100 $3" wrk "wrk $2 100 $3"
            pair "$1 close c=100 n=20000" stoa-bench "sb-close $2 100 $3" ab "ab $2 100 $3"
        done
        stop "$STOA_PID"; stop "$NGINX_PID"
        ;;
    nginx)
        start_nginx
        start_stoa epoll
        header "Stoa epoll /hello/ against nginx return 200 (wrk, ab)"
        H="http://127.0.0.1:$STOA_PORT/hello/" N="http://127.0.0.1:$NGINX_PORT/"
        S=$STOA_PID W=$NGINX_WORKER
        pair "keep-alive c=100 (wrk -t1 -c100 -d${DUR}s)" stoa-epoll "wrk $H 100 $S" nginx "wrk $N 100 $W"
        pair "keep-alive c=1000 (wrk -t1 -c1000 -d${DUR}s)" stoa-epoll "wrk $H 1000 $S" nginx "wrk $N 1000 $W"
        pair "close c=100 (ab -n 20000 -c 100)" stoa-epoll "ab $H 100 $S" nginx "ab $N 100 $W"
        stop "$STOA_PID"; stop "$NGINX_PID"
        ;;
    backends)
        header "select and poll against epoll, /hello/, 100 connections, no idle ones (wrk, ab)"
        for b in select poll epoll; do start_stoa $b; eval "PORT_$b=$STOA_PORT PID_$b=$STOA_PID"; done
        for b in select poll; do
            eval "A=http://127.0.0.1:\$PORT_$b/hello/ AP=\$PID_$b"
            E="http://127.0.0.1:$PORT_epoll/hello/"
            pair "keep-alive c=100 (wrk)" "$b" "wrk $A 100 $AP" epoll "wrk $E 100 $PID_epoll"
            pair "close c=100 (ab)" "$b" "ab $A 100 $AP" epoll "ab $E 100 $PID_epoll"
        done
        for b in select poll epoll; do eval "stop \$PID_$b"; done
        ;;
    idle)
        start_nginx
        echo
        echo "### Idle keep-alive connections (stoa-bench compare --idle-only)"
        echo
        "$BENCH" compare --idle-only --backends select,poll,epoll --idle 0,1000,5000 --runs "$RUNS" \
            --requests 20000 --stoa "$STOA" --apps-from "$REL" --out "$TMP/out" \
            --peer "nginx=http://127.0.0.1:$NGINX_PORT/@$NGINX_WORKER"
        stop "$NGINX_PID"
        ;;
    *) echo "unknown section $section" >&2; exit 2 ;;
    esac
done
