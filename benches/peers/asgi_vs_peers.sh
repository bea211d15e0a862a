#!/usr/bin/env bash
# One FastAPI app (benches/peers/asgi_app.py: /hello, /article, the /ws echo)
# under Stoa's bridge (interface = "asgi") against uvicorn, Granian and
# Hypercorn, paired. For each of WORKERS, every server of SERVERS runs at
# once on CPU 0 (the idle ones sit in their waits) and they take turns,
# ROUNDS rounds, under stoa-bench load -t 1 on CPU 1 (benches/cpu_lib.sh's
# `measure`): POINTS, each keepalive:PATH (BURST requests on CONC keep-alive
# connections) or close:PATH (CLOSE_BURST requests, HTTP/1.0, a connection
# each). Per burst: req/s and the server's CPU per request, summed over
# every process of its tree (Stoa's supervisor and workers in process mode,
# uvicorn's, Granian's and Hypercorn's main process and workers; schedstat
# ns, else utime + stime).
#
# The servers, W workers each:
#   stoa       W=1: thread mode, --workers 1 (one event loop, and the bridge's
#              one asyncio loop thread); W>1: --worker-mode process
#              --workers W (an interpreter and a loop per worker process)
#   uvicorn    --loop uvloop --http httptools --ws websockets-sansio --workers W
#   granian    --interface asgi --workers W --runtime-mode st
#              --runtime-threads 1 --loop uvloop --http 1
#   hypercorn  --worker-class uvloop --workers W
# Stoa runs with --max-requests-per-conn 100000000 (its default, 1000, would
# close keep-alive connections mid-burst; the peers never do).
#
# WebSocket echo (WS_SERVERS, at the first of WORKERS only): ws_echo_load.py
# (a bare asyncio client, uvloop) on CPU 1, WS_CONNS connections, WS_MSGS
# messages of WS_SIZE bytes, WS_WINDOW in flight per connection: messages/s,
# the server's CPU per message and the client's busy share (near 100%: the
# client was the limit, not the server).
#
# Prints each burst, then a markdown table: medians over the rounds, the
# server's busy share of its CPU (CPU per request x rate: near 100% at one
# worker means the server was the limit) and the medians of the per-round
# ratios against uvicorn and Granian in the same round (lowest-highest).
#
# Usage: benches/peers/asgi_vs_peers.sh
#   env: WORKERS ("1 2"), SERVERS ("stoa uvicorn granian hypercorn"),
#   POINTS ("keepalive:/hello keepalive:/article close:/hello close:/article"),
#   CONC (50), ROUNDS (5), BURST (5000), CLOSE_BURST (2000), WARMUP (1000 per
#   server and point), WS_SERVERS (SERVERS; "" for none), WS_CONNS (50),
#   WS_MSGS (20000), WS_SIZE (32), WS_WINDOW (1), MAX_TIME (120s),
#   REL (target/release), PLUGIN (the bridge's libstoa_python.so), STOA_ARGS
# Needs: cargo build --release; cargo build --release --manifest-path
# sample-apps/python/Cargo.toml; python3 with fastapi, uvicorn, uvloop,
# httptools, websockets, granian, hypercorn. Only 127.0.0.1; every run is
# bounded in requests and time; stops only the processes it started.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${REL:-$ROOT/target/release}
PLUGIN=${PLUGIN:-$ROOT/sample-apps/python/target/release/libstoa_python.so}
WORKERS=${WORKERS:-1 2}
SERVERS=${SERVERS:-stoa uvicorn granian hypercorn}
POINTS=${POINTS:-keepalive:/hello keepalive:/article close:/hello close:/article}
CONC=${CONC:-50}
ROUNDS=${ROUNDS:-5}
BURST=${BURST:-5000}
CLOSE_BURST=${CLOSE_BURST:-2000}
WARM=${WARMUP:-1000}
WS_SERVERS=${WS_SERVERS-$SERVERS}
WS_CONNS=${WS_CONNS:-50}
WS_MSGS=${WS_MSGS:-20000}
WS_SIZE=${WS_SIZE:-32}
WS_WINDOW=${WS_WINDOW:-1}
APPDIR=$ROOT/benches/peers
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
# shellcheck source=benches/peers/peers_lib.sh
. "$ROOT/benches/peers/peers_lib.sh"
peers_setup stoa-asgi
python3 -c 'import fastapi, uvicorn, uvloop, httptools, websockets, granian, hypercorn' 2>/dev/null || {
    echo "asgi_vs_peers.sh: needs python3 with fastapi uvicorn uvloop httptools websockets granian hypercorn" >&2
    exit 1
}
case " $SERVERS $WS_SERVERS " in
    *" stoa "*) need "$PLUGIN" "cargo build --release --manifest-path sample-apps/python/Cargo.toml" ;;
esac

mkdir -p "$TMP/asgi-apps"
[ -e "$PLUGIN" ] && cp "$PLUGIN" "$TMP/asgi-apps/"
cat >"$TMP/asgi.toml" <<TOML
log_level = "warn"
[apps.python]
mount = "/"
[apps.python.settings]
module = "asgi_app:app"
interface = "asgi"
python_path = ["$APPDIR"]
TOML

# free_port: a port no one listens on, below the ephemeral range (the
# load generator's many short connections take ports from that range).
free_port() {
    local p low
    read -r low _ </proc/sys/net/ipv4/ip_local_port_range
    for _ in $(seq 50); do
        p=$((low / 2 + RANDOM % (low / 2)))
        port_open "$p" || { echo "$p"; return 0; }
    done
    echo "no free port" >&2
    exit 1
}

# start_asgi NAME W PORT: one server on CPU 0, its output in $TMP/NAME.log;
# waits for both paths to answer as expected and for its W workers; sets
# PID_OF[NAME].
start_asgi() {
    local name=$1 w=$2 port=$3 pid mode=(--workers 1) want
    case $name in
        stoa)
            [ "$w" -gt 1 ] && mode=(--worker-mode process --workers "$w")
            # shellcheck disable=SC2086 # STOA_ARGS: one flag a word
            taskset -c 0 "$REL/stoa" --config "$TMP/asgi.toml" --apps "$TMP/asgi-apps" \
                --bind "127.0.0.1:$port" "${mode[@]}" --max-requests-per-conn 100000000 \
                --log-level warn ${STOA_ARGS:-} >"$TMP/$name.log" 2>&1 & ;;
        uvicorn)
            taskset -c 0 python3 -m uvicorn --app-dir "$APPDIR" --loop uvloop --http httptools \
                --ws websockets-sansio --workers "$w" --host 127.0.0.1 --port "$port" \
                --log-level warning --no-access-log asgi_app:app >"$TMP/$name.log" 2>&1 & ;;
        granian)
            taskset -c 0 granian --interface asgi --workers "$w" --runtime-mode st \
                --runtime-threads 1 --loop uvloop --http 1 --host 127.0.0.1 --port "$port" \
                --working-dir "$APPDIR" --log-level warning --no-access-log \
                asgi_app:app >"$TMP/$name.log" 2>&1 & ;;
        hypercorn)
            PYTHONPATH=$APPDIR taskset -c 0 hypercorn --worker-class uvloop --workers "$w" \
                --bind "127.0.0.1:$port" --log-level warning asgi_app:app >"$TMP/$name.log" 2>&1 & ;;
        *) echo "asgi_vs_peers.sh: unknown server $name" >&2; exit 1 ;;
    esac
    pid=$!
    PID_OF[$name]=$pid
    for _ in $(seq 300); do
        curl -sf -o /dev/null "http://127.0.0.1:$port/hello" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    want='{"Name":"A Royal Baby","Body":"A slow news week"} application/json'
    if [ "$(curl -s -w ' %{content_type}' "http://127.0.0.1:$port/article")" != "$want" ] ||
        [ "$(curl -s "http://127.0.0.1:$port/hello")" != "Hello World!" ]; then
        echo "$name (port $port) does not serve the app as expected:" >&2
        curl -si "http://127.0.0.1:$port/article" >&2 || true
        tail -20 "$TMP/$name.log" >&2
        exit 1
    fi
    # every worker up: the workers, or more processes (a supervisor above them)
    for _ in $(seq 100); do
        [ "$(tree_pids "$pid" | wc -l)" -ge "$w" ] && [ "$w" -eq 1 ] && break
        [ "$(tree_pids "$pid" | wc -l)" -gt "$w" ] && break
        sleep 0.1
    done
}

stop_asgi() {
    kill -TERM "${PID_OF[$1]}" 2>/dev/null || true
    wait "${PID_OF[$1]}" 2>/dev/null || true
}

# ws_burst NAME: one echo run against NAME; prints "µs-CPU/message rate client-busy%".
ws_burst() {
    local before=0 after=0 p pids out
    pids=$(tree_pids "${PID_OF[$1]}")
    for p in $pids; do before=$((before + $(cpu_ns "$p"))); done
    out=$(timeout "${MAX_TIME:-120s}" taskset -c 1 python3 "$APPDIR/ws_echo_load.py" \
        "ws://127.0.0.1:${PORT_OF[$1]}/ws" "$WS_CONNS" "$WS_MSGS" "$WS_SIZE" "$WS_WINDOW")
    for p in $pids; do after=$((after + $(cpu_ns "$p"))); done
    echo "$out" | awk -v cpu=$((after - before)) '{ gsub(/[%\/s]/, "", $6); gsub(/%/, "", $8)
        printf "%.3f %s %s\n", cpu / $2 / 1e3, $6, $8 }'
}

versions=$(python3 -c 'import importlib.metadata as m, sys
print("Python %s; " % sys.version.split()[0] + ", ".join("%s %s" % (p, m.version(p)) for p in
    ("fastapi", "starlette", "uvicorn", "uvloop", "httptools", "websockets", "granian", "hypercorn")))')
echo "$versions"
echo "servers on CPU 0, stoa-bench load -t 1 on CPU 1; $(nproc) CPUs; CONC=$CONC ROUNDS=$ROUNDS BURST=$BURST CLOSE_BURST=$CLOSE_BURST"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$TMP/results"
first=${WORKERS%% *}
declare -A PID_OF PORT_OF
for w in $WORKERS; do
    for s in $SERVERS; do
        PORT_OF[$s]=$(free_port)
        start_asgi "$s" "$w" "${PORT_OF[$s]}"
        echo "workers=$w $s: $(tree_pids "${PID_OF[$s]}" | wc -l) processes, port ${PORT_OF[$s]}"
    done
    grep -h 'ASGI event loop' "$TMP/stoa.log" 2>/dev/null | head -1 || true
    for point in $POINTS; do
        mode=${point%%:*} path=${point#*:} n=$BURST
        case $mode in
            keepalive) ;;
            close) n=$CLOSE_BURST ;;
            *) echo "POINTS: $point: expected keepalive:PATH or close:PATH" >&2; exit 1 ;;
        esac
        paired_rounds "$w $point" "$mode" "$path" "$n" "$WARM"
    done
    if [ "$w" = "$first" ] && [ -n "$WS_SERVERS" ]; then
        point=ws:$WS_CONNS
        for s in $WS_SERVERS; do
            [ -n "${PID_OF[$s]:-}" ] || { echo "WS_SERVERS: $s is not in SERVERS" >&2; exit 1; }
            WS_MSGS=$((WS_MSGS / 4)) ws_burst "$s" >/dev/null
        done
        echo "workers=$w $point: load average $(cut -d' ' -f1-3 /proc/loadavg)"
        for round in $(seq "$ROUNDS"); do
            for s in $WS_SERVERS; do
                read -r us rate busy < <(ws_burst "$s") || true
                [ -n "${busy:-}" ] || { echo "the WebSocket echo run against $s failed" >&2; exit 1; }
                echo "  round $round $s: $us us/message, $rate messages/s, client busy $busy%"
                echo "$w $point $round $s $us $rate $busy" >>"$TMP/results"
            done
        done
    fi
    for s in $SERVERS; do stop_asgi "$s"; done
    PID_OF=()
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# paired W POINT S PEER F: "median (lowest-highest)" of the per-round ratios S/PEER of column F.
paired() {
    [ "$3" = "$4" ] && { printf '1.00'; return; }
    round_ratios "$@" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR) printf "%.2f (%.2f-%.2f)", v[int((NR + 1) / 2)], v[1], v[NR]; else printf "-" }'
}
echo
echo "| workers | point | server | req/s | CPU µs/req | server busy % | req/s vs uvicorn | CPU/req vs uvicorn | req/s vs granian | CPU/req vs granian |"
echo "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"
for w in $WORKERS; do
    points=$POINTS
    [ "$w" = "$first" ] && [ -n "$WS_SERVERS" ] && points="$points ws:$WS_CONNS"
    for point in $points; do
        for s in $SERVERS; do
            us=$(round_col "$w" "$point" "$s" 5)
            [ -n "$us" ] || continue
            rps=$(round_col "$w" "$point" "$s" 6)
            echo "| $w | $point | $s | $rps | $us | $(awk -v u="$us" -v r="$rps" 'BEGIN { printf "%.0f", u * r / 1e4 }') |" \
                "$(paired "$w" "$point" "$s" uvicorn 6) | $(paired "$w" "$point" "$s" uvicorn 5) |" \
                "$(paired "$w" "$point" "$s" granian 6) | $(paired "$w" "$point" "$s" granian 5) |"
        done
    done
done
if grep -q ' ws:' "$TMP/results"; then
    echo
    echo "WebSocket echo (ws:$WS_CONNS, $WS_SIZE-byte text messages, $WS_WINDOW in flight per connection):" \
        "req/s is messages/s, CPU per message; client busy % (median):" \
        "$(for s in $WS_SERVERS; do printf '%s %s%%  ' "$s" "$(round_col "$first" "ws:$WS_CONNS" "$s" 7)"; done)"
fi
