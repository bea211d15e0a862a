#!/usr/bin/env bash
# Stoa's TLS against nginx's, paired: the same ECDSA P-256 certificate (made
# here with the openssl CLI: a CA and a leaf for localhost signed by it, in
# the scratch dir), the same /article answer (the article app's JSON; nginx
# `return 200` of the same body and Content-Type, benches/peers/nginx-article-tls.conf),
# one worker each, both running at once on CPU 0 (the idle one sits in its
# wait) and loaded in turn by stoa-bench (one thread, rustls with ring,
# checking the chain against the CA) on CPU 1, ROUNDS rounds.
#
# Points (POINTS, MODE:CONC list): keepalive:C, the server's CPU per request
# over BURST requests on C keep-alive connections, and close:C, a new
# connection and a full handshake per request (no resumption) over
# HS_BURST requests: handshakes per second and the server's CPU per
# handshake. Server CPU is its threads' run time (schedstat ns, else
# utime + stime ticks; nginx's master and worker), read before and after
# each burst. Each burst also gives the server's and the load generator's
# busy share of their CPU over the burst's wall time (the one near 100% is
# the limit) and the response bytes; each server's first line says what
# TLS settled (version, cipher suite, key exchange group).
#
# Prints every burst, then a markdown table per point: medians over the
# rounds, and the median of the per-round ratios stoa/nginx (CPU per
# request: target <= 1.0; handshakes per second: target >= 0.9) with the
# lowest and highest.
#
# Usage: benches/peers/tls_vs_nginx.sh
#   env: POINTS ("keepalive:100 keepalive:1000 close:100"), ROUNDS (9),
#   BURST (100000), HS_BURST (5000), WARMUP (20000 requests, 2000 for
#   close points, once per server and point), POLLER (epoll), SUITE (a
#   cipher suite for the client to offer alone, e.g.
#   TLS13_AES_128_GCM_SHA256; default: rustls's list, whose first is
#   TLS13_AES_256_GCM_SHA384), MAX_TIME (120s), REL (target/release),
#   STOA_ARGS (more stoa flags), BASE (a directory with another build's
#   stoa and its apps: a third server, stoa-base, and a column of paired
#   ratios stoa/stoa-base, to tell what a change to the host did)
# Needs: cargo build --release, nginx, openssl, taskset. Only 127.0.0.1;
# every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${REL:-$ROOT/target/release}
POINTS=${POINTS:-keepalive:100 keepalive:1000 close:100}
ROUNDS=${ROUNDS:-9}
BURST=${BURST:-100000}
HS_BURST=${HS_BURST:-5000}
POLLER=${POLLER:-epoll}
MAX_TIME=${MAX_TIME:-120s}
SERVERS="stoa-$POLLER:/article nginx:/article"
[ -n "${BASE:-}" ] && SERVERS="$SERVERS stoa-base:/article"
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
# shellcheck source=benches/peers/peers_lib.sh
. "$ROOT/benches/peers/peers_lib.sh"
need openssl "apt-get install -y openssl"
peers_setup stoa-tls
if [ -n "${BASE:-}" ]; then
    need "$BASE/stoa" "BASE: a directory with a stoa build and its lib*.so"
    mkdir -p "$TMP/apps-base"
    cp "$BASE/libarticle.so" "$TMP/apps-base/"
fi

# The certificate both servers serve: ECDSA P-256, as the fixtures'
# (tests/fixtures/tls/README.md), made afresh so no key is kept.
cert() {
    local d=$TMP/cert
    mkdir -p "$d"
    openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key"
    openssl req -x509 -new -key "$d/ca.key" -sha256 -days 2 -subj "/CN=stoa bench CA" \
        -out "$d/ca.pem"
    openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out "$d/key.pem"
    openssl req -new -key "$d/key.pem" -subj "/CN=localhost" -out "$d/leaf.csr"
    printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
        "keyUsage=digitalSignature" "extendedKeyUsage=serverAuth" >"$d/ext.cnf"
    openssl x509 -req -in "$d/leaf.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 2 -sha256 -extfile "$d/ext.cnf" -out "$d/cert.pem" 2>/dev/null
    CA=$d/ca.pem TLS_CERT=$d/cert.pem TLS_KEY=$d/key.pem
}
cert
NGINX_CONF=$ROOT/benches/peers/nginx-article-tls.conf
TLS_ARGS=(--ca "$CA")
[ -n "${SUITE:-}" ] && TLS_ARGS+=(--tls-suite "$SUITE")

# start_stoa_tls BINARY APPS POLLER: one worker on the TLS bind.
start_stoa_tls() {
    # shellcheck disable=SC2086 # STOA_ARGS: one flag a word
    start_server "$1" --bind tls://127.0.0.1:0 --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY" \
        --apps "$2" --poller "$3" --workers 1 --max-requests-per-conn 100000000 \
        --max-connections 10000 --log-level warn ${STOA_ARGS:-}
    CPU_PIDS=$SERVER_PID
}

# start_tls KIND: sets SERVER_PID, SERVER_PORT and CPU_PIDS.
start_tls() {
    case $1 in
        stoa-base) start_stoa_tls "$BASE/stoa" "$TMP/apps-base" "$POLLER" ;;
        stoa-*) start_stoa_tls "$REL/stoa" "$TMP/apps" "${1#stoa-}" ;;
        nginx) start_nginx ;;
    esac
}

# load MODE CONC N URL: one stoa-bench run on CPU 1, its report in
# $TMP/load and its CPU seconds (user sys) in $TMP/time.
load() {
    local keep=(-k)
    [ "$1" = close ] && keep=()
    local TIMEFORMAT='%U %S'
    { time taskset -c 1 "$BENCH" load "${keep[@]}" -t 1 -c "$2" -n "$3" --max-time "$MAX_TIME" \
        "${TLS_ARGS[@]}" "$4" >"$TMP/load"; } 2>"$TMP/time"
}

# burst MODE CONC N URL PID...: prints "µs-CPU/request rate server-busy%
# client-busy% bytes/response handshakes": rate is requests/s, or
# handshakes/s for close; a run with errors or not complete stops the script.
burst() {
    local mode=$1 conc=$2 n=$3 url=$4 before=0 after=0 p t0 t1
    shift 4
    for p in "$@"; do before=$((before + $(cpu_ns "$p"))); done
    t0=$(date +%s%N)
    load "$mode" "$conc" "$n" "$url"
    t1=$(date +%s%N)
    for p in "$@"; do after=$((after + $(cpu_ns "$p"))); done
    if grep -q 'incomplete' "$TMP/load" || grep '^errors:' "$TMP/load" | grep -qE ' [1-9]'; then
        echo "$url $mode c=$conc: errors or incomplete" >&2
        cat "$TMP/load" >&2
        exit 1
    fi
    awk -v cpu=$((after - before)) -v wall=$((t1 - t0)) -v mode="$mode" '
        FNR == NR { user = $1; sys = $2; next }
        /^complete:/ { done = $2 }
        /^requests\/s:/ { rps = $2 }
        /^transfer:/ { gsub(/[(]/, ""); bytes = $4 }
        /^handshakes:/ { hs = $2; hsps = $(NF); sub(/\/s$/, "", hsps) }
        END {
            rate = (mode == "close") ? hsps : rps
            printf "%.3f %.0f %.0f %.0f %.0f %d\n", cpu / done / 1e3, rate,
                100 * cpu / wall, 100 * (user + sys) * 1e9 / wall, bytes / done, hs
        }' "$TMP/time" "$TMP/load"
}

echo "stoa ($POLLER, 1 worker) and nginx $("$NGINX" -v 2>&1 | sed 's/.*\///') ($(openssl version | cut -d' ' -f1-2)), both on CPU 0;" \
    "stoa-bench load -t 1 on CPU 1; $(nproc) CPUs; ROUNDS=$ROUNDS BURST=$BURST HS_BURST=$HS_BURST"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A pid port cpus
for s in $SERVERS; do
    kind=${s%%:*}
    start_tls "$kind"
    pid[$kind]=$SERVER_PID port[$kind]=$SERVER_PORT cpus[$kind]=$CPU_PIDS
done
: >"$TMP/results"
for point in $POINTS; do
    mode=${point%%:*} c=${point#*:}
    n=$BURST
    [ "$mode" = close ] && n=$HS_BURST
    case $mode in
        keepalive | close) ;;
        *) echo "POINTS: $point: expected keepalive:C or close:C" >&2; exit 1 ;;
    esac
    for s in $SERVERS; do
        kind=${s%%:*}
        url="https://localhost:${port[$kind]}${s#*:}"
        warm=${WARMUP:-20000}
        [ "$mode" = close ] && warm=${WARMUP:-2000}
        load "$mode" "$c" "$warm" "$url"
        echo "$point $kind: $(grep '^tls:' "$TMP/load" | sed 's/^tls: *//')"
    done
    echo "$point: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    for round in $(seq "$ROUNDS"); do
        for s in $SERVERS; do
            kind=${s%%:*}
            # shellcheck disable=SC2086 # one argument per PID
            read -r us rate sbusy cbusy bytes hs < <(burst "$mode" "$c" "$n" \
                "https://localhost:${port[$kind]}${s#*:}" ${cpus[$kind]})
            echo "round $round $point $kind: $us us/req, $rate/s, server $sbusy%, client $cbusy%, $bytes B/resp, $hs handshakes"
            echo "$point $round $kind $us $rate $sbusy $cbusy $bytes" >>"$TMP/results"
        done
    done
done
for kind in "${!pid[@]}"; do SERVER_PID=${pid[$kind]} stop_server; done

# col POINT KIND F: the median over the rounds of column F.
col() { awk -v p="$1" -v k="$2" -v f="$3" '$1 == p && $3 == k { print $f }' "$TMP/results" | median; }
# paired POINT F [PEER]: the per-round ratios stoa/PEER (nginx) of column F:
# "median (min-max)".
paired() { ratios_spread "$1" "stoa-$POLLER" "${3:-nginx}" "$2"; }
echo
base_head="" base_rule=""
if [ -n "${BASE:-}" ]; then base_head=" stoa/stoa-base CPU per req |" base_rule="---:|"; fi
echo "| point | server | CPU µs/req | rate /s | server busy % | client busy % | B/resp | stoa/nginx CPU per req | stoa/nginx rate |$base_head"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|$base_rule"
for point in $POINTS; do
    for s in $SERVERS; do
        kind=${s%%:*}
        ratios="| |"
        [ -n "${BASE:-}" ] && ratios="| | |"
        if [ "$kind" = "stoa-$POLLER" ]; then
            ratios="| $(paired "$point" 4) | $(paired "$point" 5) |"
            [ -n "${BASE:-}" ] && ratios="$ratios $(paired "$point" 4 stoa-base) |"
        fi
        echo "| $point | $kind | $(col "$point" "$kind" 4) | $(col "$point" "$kind" 5) |" \
            "$(col "$point" "$kind" 6) | $(col "$point" "$kind" 7) | $(col "$point" "$kind" 8) $ratios"
    done
done
