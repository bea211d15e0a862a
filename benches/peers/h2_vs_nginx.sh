#!/usr/bin/env bash
# Stoa's HTTP/2 against nginx's, paired, with h2load as the client; and
# stoa's h2c against its own HTTP/1.1 keep-alive at equal requests in
# flight (does multiplexing save server CPU per request?).
#
# The method of tls_vs_nginx.sh: one worker each (stoa --workers 1, nginx
# worker_processes 1), all servers running at once on CPU 0 (the idle ones
# sit in their wait), loaded in turn by one h2load thread (`h2load -t 1`)
# on CPU 1; the same ECDSA P-256 certificate for both (the test fixtures
# tests/fixtures/tls/cert.pem and key.pem, where tls_vs_nginx.sh makes a
# fresh one of the same kind) and the same /article answer
# (the article app's JSON; nginx `return 200` of the same body and
# Content-Type). Servers:
#   stoa       one process, a plain bind (h2c by prior knowledge, and
#              HTTP/1.1) and a tls:// bind (h2 by ALPN)
#   nginx-h2   benches/peers/nginx-article-h2.conf (`listen ... ssl http2`)
#   nginx-h2c  benches/peers/nginx-article-h2c.conf (`listen ... http2`)
#
# Points (POINTS, PROTO:C:M:N list): stoa against nginx, PROTO h2 (TLS,
# ALPN) or h2c, `h2load -c C -m M -n N`. MUX (two PROTO:C:M, PROTO h2c or
# h1; empty: none) at MUX_N requests each: stoa against itself, by default h2c at
# `-c 10 -m 10` against HTTP/1.1 keep-alive at `--h1 -c 100 -m 1` (100
# requests in flight either way). Each point: a warm-up of each side, then
# ROUNDS rounds of one burst per side, the order of the two turned round
# every round. A burst's figure is the server's CPU time over it (schedstat
# run time of every thread, else utime + stime: nginx's master and worker;
# stoa's whole process tree, since its default is process mode: the
# supervisor and its worker process) divided by the requests h2load
# answered. h2load opens its C connections afresh in every burst, so a
# burst's CPU includes C connection setups (C TLS handshakes on h2); with
# SETUP=1 (default) each round also runs a burst of C requests on C new
# connections (one each, -m 1) on the same side, and the table gives, beside
# the plain figure, the CPU per request with C of those setups taken off:
# (cpu - C * setup_cpu_per_conn) / (N - C).
#
# Prints every burst, then a markdown table, a row per side of each point:
# medians over the rounds, the median of the per-round ratios A/B (stoa/nginx, or h2c/h1)
# with the lowest and highest. SYSCALLS=1 adds, after the CPU rounds (strace
# slows the server), syscalls per request of stoa for the MUX pair
# (`strace -c -f` attached to every process of its tree over SYSCALL_N
# requests; the supervisor's own few calls are in the count).
#
# Usage: benches/peers/h2_vs_nginx.sh
#   env: POINTS ("h2:100:10:1000000 h2:1000:1:200000 h2c:100:10:800000
#   h2c:1000:1:400000"), MUX ("h2c:10:10 h1:100:1"), MUX_N (600000),
#   ROUNDS (3), WARMUP (50000 requests a side and point), SETUP (1),
#   SYSCALLS (0), SYSCALL_N (20000), TLS_CERT and TLS_KEY (the fixtures),
#   REL (target/release), STOA_ARGS (more stoa flags), H2LOAD (h2load),
#   MAX_TIME (300s: every h2load run is bounded by `timeout`)
# Needs: cargo build --release, nginx (1.22: `listen ... http2`), h2load
# (nghttp2-client), taskset; strace for SYSCALLS=1. Only 127.0.0.1; every
# run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${REL:-$ROOT/target/release}
POINTS=${POINTS:-h2:100:10:1000000 h2:1000:1:200000 h2c:100:10:800000 h2c:1000:1:400000}
MUX=${MUX-h2c:10:10 h1:100:1}
MUX_N=${MUX_N:-600000}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-50000}
SETUP=${SETUP:-1}
SYSCALLS=${SYSCALLS:-0}
SYSCALL_N=${SYSCALL_N:-20000}
MAX_TIME=${MAX_TIME:-300s}
H2LOAD=${H2LOAD:-h2load}
TLS_CERT=${TLS_CERT:-$ROOT/tests/fixtures/tls/cert.pem}
TLS_KEY=${TLS_KEY:-$ROOT/tests/fixtures/tls/key.pem}
# peers_setup checks the binaries SERVERS names (stoa-bench too: unused here).
SERVERS="stoa-epoll:/article nginx:/article"
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
# shellcheck source=benches/peers/peers_lib.sh
. "$ROOT/benches/peers/peers_lib.sh"
need "$H2LOAD" "apt-get install -y nghttp2-client"
[ "$SYSCALLS" = 1 ] && need strace "apt-get install -y strace"
need "$TLS_CERT" "a PEM certificate"
need "$TLS_KEY" "its PEM key"
peers_setup stoa-h2
# The binary copied, so a build finishing during the run changes nothing.
cp "$REL/stoa" "$TMP/stoa"

# start_stoa_h2: one worker, a plain bind and a tls:// bind; sets STOA_PID,
# PLAIN_PORT and TLS_PORT.
start_stoa_h2() {
    : >"$TMP/server.out"
    # shellcheck disable=SC2086 # STOA_ARGS: one flag a word
    taskset -c 0 "$TMP/stoa" --bind 127.0.0.1:0 --bind tls://127.0.0.1:0 \
        --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY" --apps "$TMP/apps" --poller epoll \
        --workers 1 --max-requests-per-conn 100000000 --max-connections 10000 \
        --log-level warn ${STOA_ARGS:-} >"$TMP/server.out" 2>"$TMP/server.err" &
    STOA_PID=$! PLAIN_PORT="" TLS_PORT=""
    for _ in $(seq 100); do
        PLAIN_PORT=$(sed -n 's/^listening on http:\/\/127.0.0.1://p' "$TMP/server.out")
        TLS_PORT=$(sed -n 's/^listening on https:\/\/127.0.0.1://p' "$TMP/server.out")
        [ -n "$PLAIN_PORT" ] && [ -n "$TLS_PORT" ] && return 0
        kill -0 "$STOA_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "stoa did not start:" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

# start_nginx_conf NAME CONF: nginx from CONF in $TMP/NAME (its own prefix,
# pid file and logs); sets NGINX_PID and NGINX_PORT.
start_nginx_conf() {
    mkdir -p "$TMP/$1/nginx/tmp"
    # peers_lib's start_nginx works in $TMP/nginx: point TMP at $TMP/NAME.
    TMP=$TMP/$1 NGINX_CONF=$2 start_nginx
    NGINX_PID=$SERVER_PID NGINX_PORT=$SERVER_PORT
}

declare -A top url_of
start_stoa_h2
top[stoa]=$STOA_PID
start_nginx_conf nginx-h2 "$ROOT/benches/peers/nginx-article-h2.conf"
top[nginx-h2]=$NGINX_PID nginx_h2_port=$NGINX_PORT
start_nginx_conf nginx-h2c "$ROOT/benches/peers/nginx-article-h2c.conf"
top[nginx-h2c]=$NGINX_PID nginx_h2c_port=$NGINX_PORT
url_of[stoa:h2]="https://127.0.0.1:$TLS_PORT/article"
url_of[stoa:h2c]="http://127.0.0.1:$PLAIN_PORT/article"
url_of[stoa:h1]="http://127.0.0.1:$PLAIN_PORT/article"
url_of[nginx-h2:h2]="https://127.0.0.1:$nginx_h2_port/article"
url_of[nginx-h2c:h2c]="http://127.0.0.1:$nginx_h2c_port/article"

# load PROTO C M N URL: one h2load run on CPU 1, its report in $TMP/load
# and its CPU seconds (user sys) in $TMP/time.
load() {
    local h1=()
    [ "$1" = h1 ] && h1=(--h1)
    local TIMEFORMAT='%U %S'
    { time taskset -c 1 timeout "$MAX_TIME" "$H2LOAD" "${h1[@]}" -t 1 -c "$2" -m "$3" -n "$4" \
        "$5" >"$TMP/load" 2>&1; } 2>"$TMP/time"
}

# burst SERVER PROTO C M N: prints "µs-CPU/request req/s server-busy%
# client-busy% bytes/response"; a run that answered fewer than N requests
# with 2xx stops the script.
burst() {
    local server=$1 proto=$2 c=$3 m=$4 n=$5 before=0 after=0 p t0 t1 pids
    local url=${url_of[$server:$proto]}
    pids=$(tree_pids "${top[$server]}")
    for p in $pids; do before=$((before + $(cpu_ns "$p"))); done
    t0=$(date +%s%N)
    load "$proto" "$c" "$m" "$n" "$url" || true
    t1=$(date +%s%N)
    for p in $pids; do after=$((after + $(cpu_ns "$p"))); done
    if ! grep -q "^status codes: $n 2xx" "$TMP/load"; then
        echo "$server $proto -c $c -m $m -n $n: not every request answered 2xx" >&2
        cat "$TMP/load" >&2
        exit 1
    fi
    awk -v cpu=$((after - before)) -v wall=$((t1 - t0)) -v n="$n" '
        FNR == NR { user = $1; sys = $2; next }
        /^finished in/ { rps = $4 }
        /^traffic:/ { gsub(/[()]/, ""); bytes = $3 }
        END {
            printf "%.3f %.0f %.0f %.0f %.0f\n", cpu / n / 1e3, rps,
                100 * cpu / wall, 100 * (user + sys) * 1e9 / wall, bytes / n
        }' "$TMP/time" "$TMP/load"
}

# side SERVER PROTO C M N ROUND KEY: one burst (and with SETUP=1 a setup
# burst of C connections, one request each), printed and appended to
# $TMP/results as "KEY ROUND SERVER:PROTO µs/req req/s server% client%
# B/resp setup-µs/conn µs/req-without-setup".
side() {
    local server=$1 proto=$2 c=$3 m=$4 n=$5 round=$6 key=$7 us rps sb cb bytes sus="-" net="-"
    read -r us rps sb cb bytes < <(burst "$server" "$proto" "$c" "$m" "$n")
    if [ "$SETUP" = 1 ]; then
        read -r sus _ < <(burst "$server" "$proto" "$c" 1 "$c")
        net=$(awk -v us="$us" -v s="$sus" -v n="$n" -v c="$c" \
            'BEGIN { printf "%.3f", (us * n - s * c) / (n - c) }')
    fi
    echo "round $round $key $server $proto: $us us/req, $rps req/s, server $sb%, client $cb%," \
        "$bytes B/resp, setup $sus us/conn, $net us/req without setup"
    echo "$key $round $server:$proto $us $rps $sb $cb $bytes $sus $net" >>"$TMP/results"
}

# compare KEY A B C_A M_A C_B M_B N: A and B are SERVER:PROTO; warm-up of
# each, then ROUNDS rounds of one burst each, A first in odd rounds.
compare() {
    local key=$1 a=$2 b=$3 ca=$4 ma=$5 cb=$6 mb=$7 n=$8 round
    load "${a#*:}" "$ca" "$ma" "$WARMUP" "${url_of[$a]}"
    echo "$key ${a%%:*}: $(grep -E '^(TLS Protocol|Cipher|Server Temp Key|Application protocol):' "$TMP/load" | tr '\n' ' ')"
    load "${b#*:}" "$cb" "$mb" "$WARMUP" "${url_of[$b]}"
    echo "$key ${b%%:*}: $(grep -E '^(TLS Protocol|Cipher|Server Temp Key|Application protocol):' "$TMP/load" | tr '\n' ' ')"
    echo "$key: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    for round in $(seq "$ROUNDS"); do
        if [ $((round % 2)) = 1 ]; then
            side "${a%%:*}" "${a#*:}" "$ca" "$ma" "$n" "$round" "$key"
            side "${b%%:*}" "${b#*:}" "$cb" "$mb" "$n" "$round" "$key"
        else
            side "${b%%:*}" "${b#*:}" "$cb" "$mb" "$n" "$round" "$key"
            side "${a%%:*}" "${a#*:}" "$ca" "$ma" "$n" "$round" "$key"
        fi
    done
}

echo "stoa (epoll, 1 worker, $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')) and" \
    "nginx $("$NGINX" -v 2>&1 | sed 's/.*\///') on CPU 0; $("$H2LOAD" --version | head -1) -t 1 on CPU 1;" \
    "$(nproc) CPUs; ROUNDS=$ROUNDS WARMUP=$WARMUP SETUP=$SETUP"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "other load: $(pgrep -c stress-ng || true) stress-ng processes, $(pgrep -c cargo || true) cargo"
: >"$TMP/results"
keys=()
for point in $POINTS; do
    IFS=: read -r proto c m n <<<"$point"
    case $proto in
        h2) peer=nginx-h2 ;;
        h2c) peer=nginx-h2c ;;
        *) echo "POINTS: $point: expected h2:C:M:N or h2c:C:M:N" >&2; exit 1 ;;
    esac
    key="$proto:c$c:m$m"
    keys+=("$key|stoa:$proto|$peer:$proto")
    compare "$key" "stoa:$proto" "$peer:$proto" "$c" "$m" "$c" "$m" "$n"
done
if [ -n "$MUX" ]; then
    read -r mux_a mux_b <<<"$MUX"
    IFS=: read -r pa ca ma <<<"$mux_a"
    IFS=: read -r pb cb mb <<<"$mux_b"
    key="stoa-$pa:c$ca:m$ma-vs-$pb:c$cb:m$mb"
    keys+=("$key|stoa:$pa|stoa:$pb")
    compare "$key" "stoa:$pa" "stoa:$pb" "$ca" "$ma" "$cb" "$mb" "$MUX_N"
fi

# col KEY SIDE F: the median over the rounds of column F.
col() {
    awk -v k="$1" -v s="$2" -v f="$3" '$1 == k && $3 == s { print $f }' "$TMP/results" | median
}
# paired KEY A B F: the per-round ratios A/B of column F: "median (min-max)".
paired() { ratios_spread "$@"; }
echo
echo "| point | side | CPU µs/req | req/s | server busy % | client busy % | B/resp | setup µs/conn | µs/req without setup | A/B CPU per req | A/B without setup |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for entry in "${keys[@]}"; do
    IFS='|' read -r key a b <<<"$entry"
    for s in "$a" "$b"; do
        ratios="| |"
        [ "$s" = "$a" ] && ratios="| $(paired "$key" "$a" "$b" 4) | $(paired "$key" "$a" "$b" 10) |"
        echo "| $key | $s | $(col "$key" "$s" 4) | $(col "$key" "$s" 5) | $(col "$key" "$s" 6) |" \
            "$(col "$key" "$s" 7) | $(col "$key" "$s" 8) | $(col "$key" "$s" 9) | $(col "$key" "$s" 10) $ratios"
    done
done

# Syscalls per request of stoa for the MUX pair: strace -c -f attached to
# every process of stoa's tree over SYSCALL_N requests.
if [ "$SYSCALLS" = 1 ] && [ -n "$MUX" ]; then
    echo
    for side_spec in "$mux_a" "$mux_b"; do
        IFS=: read -r p c m <<<"$side_spec"
        strace_args=()
        for pid in $(tree_pids "${top[stoa]}"); do strace_args+=(-p "$pid"); done
        strace -c -f "${strace_args[@]}" -o "$TMP/strace" 2>/dev/null &
        tracer=$!
        sleep 1
        load "$p" "$c" "$m" "$SYSCALL_N" "${url_of[stoa:$p]}"
        sleep 0.5
        kill -INT "$tracer"
        wait "$tracer" || true
        grep -q "^status codes: $SYSCALL_N 2xx" "$TMP/load" || echo "$side_spec: not every request 2xx" >&2
        # strace -c columns: % time, seconds, usecs/call, calls, [errors,] syscall.
        awk -v n="$SYSCALL_N" -v s="stoa $p -c $c -m $m" '$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {
                line = line sprintf(" %s %.3f", $NF, $4 / n) }
            $NF == "total" { total = $4 }
            END { printf "syscalls %s: %.3f per request:%s\n", s, total / n, line }' "$TMP/strace"
    done
fi

for s in stoa nginx-h2 nginx-h2c; do SERVER_PID=${top[$s]} stop_server; done
