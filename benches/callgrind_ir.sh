#!/usr/bin/env bash
# Instructions (callgrind Ir) per request of one stoa build: the figure that
# stays put on a noisy machine. A one-worker server runs under
# `valgrind --tool=callgrind` on CPU 0; stoa-bench on CPU 1 sends a
# warm-up, then the counters are zeroed, exactly N keep-alive requests are
# sent, and the counters are dumped. Ir of that dump / N is printed, all
# threads of the server included; the dump is kept for callgrind_annotate.
#
# The host vets each plugin in a child started from /proc/self/exe, which
# under valgrind is valgrind's own tool binary: a small LD_PRELOAD shim
# (built here with cc) points that child at the real stoa binary. Plugins
# are copied to a private directory (STOA_PLUGIN_COPIES=dir) so that
# callgrind names their functions.
#
# Usage: benches/callgrind_ir.sh STOA_DIR [PATH] [CONCURRENCY] [POLLER]
#   STOA_DIR holds `stoa` and the apps' .so files (target/release works).
#   env: N (requests measured, default 20000), WARMUP (default 5000),
#   OUT (where the callgrind dump goes, default /tmp/stoa-callgrind.out),
#   BENCH (stoa-bench), CALLGRIND_OPTS (more valgrind options, e.g.
#   "--cache-sim=yes" to count cache misses too)
# Only 127.0.0.1 is loaded; every run is bounded in requests and time.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$1 URLPATH=${2:-/article} CONC=${3:-100} POLLER=${4:-epoll}
N=${N:-20000}
WARMUP=${WARMUP:-5000}
OUT=${OUT:-/tmp/stoa-callgrind.out}
BENCH=${BENCH:-$ROOT/target/release/stoa-bench}
# shellcheck source=benches/cpu_lib.sh
. "$ROOT/benches/cpu_lib.sh"
need "$BENCH" "cargo build --release"
need valgrind "apt-get install valgrind"
need callgrind_control "apt-get install valgrind"
need taskset "util-linux"
need cc "apt-get install gcc"
TMP=$(mktemp -d /tmp/stoa-callgrind.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/apps"
cp "$DIR"/lib{hello_project,article}.so "$TMP/apps/"
cat >"$TMP/shim.c" <<'SHIM'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);
static const char *real(const char *path) {
    const char *exe = getenv("STOA_PROBE_EXE");
    return (exe && strcmp(path, "/proc/self/exe") == 0) ? exe : path;
}
#define FORWARD(name) \
    int name(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa, \
             const posix_spawnattr_t *at, char *const argv[], char *const envp[]) { \
        spawn_fn next = (spawn_fn)dlsym(RTLD_NEXT, #name); \
        return next(pid, real(path), fa, at, argv, envp); \
    }
FORWARD(posix_spawn)
FORWARD(posix_spawnp)
SHIM
cc -shared -fPIC -O2 -o "$TMP/shim.so" "$TMP/shim.c" -ldl

STOA_PLUGIN_COPIES=dir STOA_PROBE_EXE=$(realpath "$DIR/stoa") LD_PRELOAD="$TMP/shim.so" \
    start_server valgrind --tool=callgrind --compress-strings=no ${CALLGRIND_OPTS:-} \
    --callgrind-out-file="$TMP/cg.out" "$DIR/stoa" --bind 127.0.0.1:0 \
    --apps "$TMP/apps" --poller "$POLLER" --workers 1 --log-level warn
url="http://127.0.0.1:$SERVER_PORT$URLPATH"
load=(taskset -c 1 "$BENCH" load -k -t 1 -c "$CONC" --max-time 300s)
"${load[@]}" -n "$WARMUP" "$url" >/dev/null
callgrind_control -z "$SERVER_PID" >/dev/null
"${load[@]}" -n "$N" "$url" >"$TMP/load"
callgrind_control -d "$SERVER_PID" >/dev/null
done=$(awk '/^complete:/ { print $2 }' "$TMP/load")
[ "${done:-0}" -eq "$N" ] || { echo "$url: $done of $N answered" >&2; exit 1; }
dump=$(ls -t "$TMP"/cg.out* | head -1)
cp "$dump" "$OUT"
ir=$(awk '/^summary:/ { print $2 }' "$OUT")
awk -v ir="$ir" -v n="$N" -v p="$POLLER" -v u="$URLPATH" -v c="$CONC" \
    'BEGIN { printf "%s %s c=%s: %.0f Ir/request (%d Ir over %d requests)\n", p, u, c, ir / n, ir, n }'
stop_server
