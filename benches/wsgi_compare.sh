#!/usr/bin/env bash
# The seed's experiment with the real thing: the Django hello project
# (sample-apps/wsgi/examples/djangohello, /hello/ -> "Hello World!") under
# Stoa's WSGI bridge on each poller backend (1 worker), gunicorn (1 worker,
# sync and gthread) and Tornado's WSGIContainer, keep-alive and a connection
# per request, through `stoa-bench compare --peer`: every server on CPU 0, the
# load generator on CPU 1, server CPU per request from /proc (utime+stime of
# the serving process: stoa, gunicorn's worker, tornado).
#   Needs: python3 with django, gunicorn, tornado (.ci/run installs them).
#   Writes benches/results/NAME.{md,csv,svg} (NAME=wsgi-compare).
# Only 127.0.0.1; stops only the PIDs it started.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=${NAME:-wsgi-compare}
REQUESTS=${REQUESTS:-3000}
CONCURRENCY=${CONCURRENCY:-1,32}
GTHREADS=${GTHREADS:-4}
PROJECT=$ROOT/sample-apps/wsgi/examples/djangohello
REL=$ROOT/target/release

for module in django gunicorn tornado; do
    python3 -c "import $module" 2>/dev/null \
        || { echo "wsgi_compare.sh needs the Python package $module (pip install $module)" >&2; exit 1; }
done
(cd "$ROOT" && cargo build --release -q)
cargo build --release -q --manifest-path "$ROOT/sample-apps/wsgi/Cargo.toml"
PLUGIN=$ROOT/sample-apps/wsgi/target/release/libstoa_wsgi.so

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
[apps.wsgi]
mount = "/"
[apps.wsgi.settings]
module = "djangohello.wsgi:application"
python_path = ["$PROJECT"]
TOML

wait_up() { for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
# gunicorn's worker: the process that serves (the arbiter only supervises).
worker_of() { for _ in $(seq 100); do pgrep -P "$1" && return 0; sleep 0.1; done; return 1; }

gunicorn_peer() { # NAME PORT ARGS...
    local name=$1 port=$2; shift 2
    taskset -c 0 python3 -m gunicorn --workers 1 "$@" --bind "127.0.0.1:$port" \
        --chdir "$PROJECT" --log-level warning djangohello.wsgi:application &
    local arbiter=$!
    PIDS+=("$arbiter")
    wait_up "http://127.0.0.1:$port/hello/"
    PEERS+=(--peer "$name=http://127.0.0.1:$port/hello/@$(worker_of "$arbiter")")
}

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
