#!/usr/bin/env bash
# The seed's experiment with the real thing: the Django hello project
# (sample-apps/python/examples/djangohello, /hello/ -> "Hello World!") under
# Stoa's WSGI bridge against Python's WSGI servers. Two runs:
#
# benches/wsgi_compare.sh [matrix]: Stoa on each poller backend (1 worker,
# thread mode), gunicorn (1 worker, sync and gthread) and Tornado's
# WSGIContainer, keep-alive and a connection per request, through
# `stoa-bench compare --peer`: every server on CPU 0, the load generator on
# CPU 1, server CPU per request from /proc over every process of each
# server. Writes benches/results/NAME.{md,csv,svg} (NAME=wsgi-compare).
#   Needs: python3 with django, gunicorn, tornado (.ci/run installs them).
#
# benches/wsgi_compare.sh paired: for each of WORKERS (1 2), Stoa in process
# mode (--workers W, --blocking-threads THREADS), gunicorn gthread (--workers
# W --threads THREADS), uWSGI (--http11-socket, --master --processes W
# --threads THREADS) and Granian (--interface wsgi --workers W
# --blocking-threads THREADS), all running at once on CPU 0 and loaded in
# turn (ROUNDS rounds of BURST requests each, keep-alive and a connection per
# request at CONC connections) by stoa-bench on CPU 1. Prints each burst and
# a table: median req/s and CPU µs per request (every process of a server:
# supervisor/master/arbiter and workers), and the medians of the per-round
# ratios against Stoa in the same round.
#   Needs: python3 with django, gunicorn, uwsgi, granian (pip install ...).
#   env: WORKERS ("1 2"), THREADS (4), CONC (32), ROUNDS (5), BURST (3000),
#   WARMUP (1000 per server and mode), MODES ("keepalive close"),
#   SERVERS ("stoa gunicorn uwsgi granian")
# Only 127.0.0.1; stops only the PIDs it started.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN=${1:-matrix}
case $RUN in
    matrix) MODULES="django gunicorn tornado" ;;
    paired) MODULES="django gunicorn uwsgi granian" ;;
    *) echo "wsgi_compare.sh: unknown run $RUN (matrix, paired)" >&2; exit 1 ;;
esac
NAME=${NAME:-wsgi-compare}
REQUESTS=${REQUESTS:-3000}
CONCURRENCY=${CONCURRENCY:-1,32}
GTHREADS=${GTHREADS:-4}
PROJECT=$ROOT/sample-apps/python/examples/djangohello
REL=$ROOT/target/release

for module in $MODULES; do
    python3 -c "import $module" 2>/dev/null \
        || python3 -m pip show "$module" >/dev/null 2>&1 \
        || { echo "wsgi_compare.sh needs the Python package $module (pip install $module)" >&2; exit 1; }
done
(cd "$ROOT" && cargo build --release -q)
cargo build --release -q --manifest-path "$ROOT/sample-apps/python/Cargo.toml"
PLUGIN=$ROOT/sample-apps/python/target/release/libstoa_python.so

T=$(mktemp -d /tmp/stoa-wsgi-compare.XXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT

# Django at / (the peers' URL); the native hello-project moves aside.
cat > "$T/stoa.toml" <<TOML
log_level = "warn"
[apps.hello-project]
mount = "/native"
[apps.python]
mount = "/"
[apps.python.settings]
module = "djangohello.wsgi:application"
python_path = ["$PROJECT"]
TOML

wait_up() { for _ in $(seq 300); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
# A master's first child: once there, the master has started its workers.
worker_of() { for _ in $(seq 100); do pgrep -P "$1" >/dev/null && return 0; sleep 0.1; done; return 1; }

gunicorn_peer() { # NAME PORT ARGS...
    local name=$1 port=$2; shift 2
    taskset -c 0 python3 -m gunicorn --workers 1 "$@" --bind "127.0.0.1:$port" \
        --chdir "$PROJECT" --log-level warning djangohello.wsgi:application &
    local arbiter=$!
    PIDS+=("$arbiter")
    wait_up "http://127.0.0.1:$port/hello/"
    worker_of "$arbiter"
    # The arbiter's PID: the harness counts it and its workers.
    PEERS+=(--peer "$name=http://127.0.0.1:$port/hello/@$arbiter")
}

if [ "$RUN" = paired ]; then
    # shellcheck source=benches/cpu_lib.sh
    . "$ROOT/benches/cpu_lib.sh"
    BENCH=$REL/stoa-bench
    WORKERS=${WORKERS:-1 2}
    THREADS=${THREADS:-4}
    CONC=${CONC:-32}
    ROUNDS=${ROUNDS:-5}
    BURST=${BURST:-3000}
    WARMUP=${WARMUP:-1000}
    MODES=${MODES:-keepalive close}
    SERVERS=${SERVERS:-stoa gunicorn uwsgi granian}
    TMP=$T
    mkdir -p "$T/apps"
    cp "$PLUGIN" "$REL/libhello_project.so" "$T/apps/"
    # start_peer NAME W PORT: starts one server on CPU 0 and waits for its
    # answer; sets PID_OF[NAME].
    start_peer() {
        local name=$1 w=$2 port=$3 pid
        case $name in
            stoa)
                taskset -c 0 "$REL/stoa" --config "$T/stoa.toml" --apps "$T/apps" \
                    --bind "127.0.0.1:$port" --worker-mode process --workers "$w" \
                    --blocking-threads "$THREADS" --log-level warn >"$T/stoa.out" 2>"$T/stoa.err" & ;;
            gunicorn)
                taskset -c 0 python3 -m gunicorn --workers "$w" --worker-class gthread \
                    --threads "$THREADS" --bind "127.0.0.1:$port" --chdir "$PROJECT" \
                    --log-level warning djangohello.wsgi:application & ;;
            uwsgi)
                taskset -c 0 uwsgi --http11-socket "127.0.0.1:$port" --master \
                    --processes "$w" --threads "$THREADS" --chdir "$PROJECT" \
                    --module djangohello.wsgi:application --disable-logging --die-on-term \
                    --need-app >"$T/uwsgi.out" 2>&1 & ;;
            granian)
                taskset -c 0 granian --interface wsgi --workers "$w" \
                    --blocking-threads "$THREADS" --host 127.0.0.1 --port "$port" \
                    --working-dir "$PROJECT" --log-level warning \
                    djangohello.wsgi:application >"$T/granian.out" 2>&1 & ;;
        esac
        pid=$!
        PIDS+=("$pid")
        PID_OF[$name]=$pid
        wait_up "http://127.0.0.1:$port/hello/"
        # every worker up: as many children as asked (stoa, gunicorn, uwsgi, granian)
        for _ in $(seq 100); do
            [ "$(tree_pids "$pid" | wc -l)" -gt "$w" ] && break
            sleep 0.1
        done
    }
    ulimit -n "$(ulimit -Hn)"
    echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); $THREADS threads per worker, c=$CONC, bursts of $BURST"
    : >"$T/results"
    for w in $WORKERS; do
        declare -A PID_OF PORT_OF
        port=18600
        for s in $SERVERS; do
            port=$((port + 1))
            PORT_OF[$s]=$port
            start_peer "$s" "$w" "$port"
        done
        for mode in $MODES; do
            paired_rounds "$w $mode" "$mode" /hello/ "$BURST" "$WARMUP"
        done
        for s in $SERVERS; do
            kill -TERM "${PID_OF[$s]}" 2>/dev/null || true
            wait "${PID_OF[$s]}" 2>/dev/null || true
        done
        PIDS=()
        unset PID_OF PORT_OF
    done
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    # vs W MODE S F: median over the rounds of S's column F / stoa's
    vs() { round_ratios "$1" "$2" "$3" stoa "$4" | median | awk '{ if ($1 != "") printf "%.2f", $1; else printf "-" }'; }
    spread() {
        round_ratios "$1" "$2" "$3" stoa 5 | sort -n |
            awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) printf "%.2f-%.2f", lo, hi; else printf "-" }'
    }
    echo
    echo "| workers | mode | server | req/s | CPU µs/req | req/s vs stoa | CPU/req vs stoa | CPU/req vs stoa, lowest-highest |"
    echo "|---:|---|---|---:|---:|---:|---:|---|"
    for w in $WORKERS; do
        for mode in $MODES; do
            for s in $SERVERS; do
                echo "| $w | $mode | $s | $(round_col "$w" "$mode" "$s" 6) | $(round_col "$w" "$mode" "$s" 5) |" \
                    "$(vs "$w" "$mode" "$s" 6) | $(vs "$w" "$mode" "$s" 5) | $(spread "$w" "$mode" "$s") |"
            done
        done
    done
    exit 0
fi

PEERS=()
gunicorn_peer gunicorn-sync 18501 --worker-class sync
gunicorn_peer gunicorn-gthread 18502 --worker-class gthread --threads "$GTHREADS"
taskset -c 0 python3 "$ROOT/benches/peers/tornado_wsgi.py" 18503 "$PROJECT" &
PIDS+=($!)
wait_up http://127.0.0.1:18503/hello/
PEERS+=(--peer "tornado-wsgi=http://127.0.0.1:18503/hello/@$!")

"$REL/stoa-bench" compare --app "$PLUGIN" --stoa-arg=--config="$T/stoa.toml" \
    --stoa-arg=--workers=1 --paths /hello/ --modes keepalive,close \
    --concurrency "$CONCURRENCY" --requests "$REQUESTS" --runs 1 --no-idle \
    "${PEERS[@]}" --out "$ROOT/benches/results" --name "$NAME"
