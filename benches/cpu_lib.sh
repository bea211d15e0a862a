# Helpers sourced by benches/ab_cpu.sh and benches/peers/cpu_vs_peers.sh:
# start a server pinned to CPU 0, load it from CPU 1 with stoa-bench, read
# the server's CPU time. The caller sets TMP (a scratch dir), BENCH
# (stoa-bench), N (requests per point); WARMUP and MAX_TIME are optional.

# need FILE-OR-COMMAND HINT: exit 1 with a message when it is missing.
need() {
    if [[ $1 == */* ]]; then [ -e "$1" ] && return 0; fi
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "$(basename "$0"): missing $1 ($2)" >&2
    exit 1
}

TICK=$(getconf CLK_TCK)

# two_builds NAME A B: checks stoa-bench, taskset and the two stoa binaries,
# makes TMP (removed at exit) and copies each binary's apps (the lib*.so
# built beside it) into $TMP/apps-A and $TMP/apps-B.
two_builds() {
    need "$BENCH" "cargo build --release"
    need taskset "util-linux"
    TMP=$(mktemp -d "/tmp/$1.XXXXXX")
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
    local side=A bin
    for bin in "$2" "$3"; do
        need "$bin" "a stoa binary"
        mkdir -p "$TMP/apps-$side"
        cp "$(dirname "$bin")"/lib{hello_project,article,environ,demo}.so "$TMP/apps-$side/"
        side=B
    done
}

# cpu_ns PID: the process's CPU time so far, ns: the sum of the first field
# of /proc/PID/task/*/schedstat (live threads), else utime + stime in ticks.
cpu_ns() {
    local total=0 f v
    if [ -r "/proc/$1/schedstat" ]; then
        for f in /proc/"$1"/task/*/schedstat; do
            { read -r v _ <"$f"; } 2>/dev/null && total=$((total + v))
        done
        echo "$total"
    else
        awk -v hz="$TICK" '{ sub(/.*\) /, ""); printf "%.0f\n", ($12 + $13) * 1e9 / hz }' "/proc/$1/stat"
    fi
}

# tree_pids PID: PID and every live process descended from it (a
# process-mode host's supervisor and workers), one a line, PID first.
tree_pids() {
    ps -e -o pid=,ppid= | awk -v root="$1" '{ parent[$1] = $2 }
        END {
            n = 1; list[1] = root; print root
            for (i = 1; i <= n; i++)
                for (p in parent)
                    if (parent[p] == list[i] && p != root) { list[++n] = p; print p }
        }'
}

# start_server CMD...: starts CMD on CPU 0 and waits (10 s at most) for its
# "listening on http://127.0.0.1:PORT" (or https://) line; sets SERVER_PID,
# SERVER_PORT.
start_server() {
    # Made here, so the first look below finds it even before the child runs.
    : >"$TMP/server.out"
    taskset -c 0 "$@" >"$TMP/server.out" 2>"$TMP/server.err" &
    SERVER_PID=$! SERVER_PORT=""
    for _ in $(seq 100); do
        SERVER_PORT=$(sed -n 's/^listening on https\{0,1\}:\/\/127.0.0.1://p' "$TMP/server.out")
        [ -n "$SERVER_PORT" ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "$1 did not start:" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

# start_stoa BINARY POLLER: one worker, the apps copied into $APPS
# (default $TMP/apps).
start_stoa() {
    start_server "$1" --bind 127.0.0.1:0 --apps "${APPS:-$TMP/apps}" --poller "$2" \
        --workers 1 --log-level warn
}

stop_server() {
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
}

# measure URL CONC PID...: a warm-up (none if WARMUP=0), then N requests from stoa-bench on
# CPU 1 (one thread, CONC connections; keep-alive unless MODE=close, a new
# connection per request). Prints the PIDs' CPU time per answered request
# in µs, req/s, then each PID's own µs/request.
measure() {
    local url=$1 conc=$2 pid before=() after=() i=0 keep=(-k)
    shift 2
    case ${MODE:-keepalive} in
        keepalive) ;;
        close) keep=() ;;
        *) echo "MODE=$MODE: expected keepalive or close" >&2; exit 1 ;;
    esac
    local load=(taskset -c 1 "$BENCH" load "${keep[@]}" -t 1 -c "$conc" --max-time "${MAX_TIME:-120s}")
    if [ "${WARMUP:-20000}" -gt 0 ]; then
        "${load[@]}" -n "${WARMUP:-20000}" "$url" >/dev/null
    fi
    for pid in "$@"; do before+=("$(cpu_ns "$pid")"); done
    "${load[@]}" -n "$N" "$url" >"$TMP/load"
    for pid in "$@"; do after+=("$(cpu_ns "$pid")"); done
    if grep -q 'incomplete' "$TMP/load" || grep '^errors:' "$TMP/load" | grep -qE ' [1-9]'; then
        echo "$url c=$conc:" >&2
        grep -E '^(stopped by|complete|errors):' "$TMP/load" >&2
    fi
    local done rps
    done=$(awk '/^complete:/ { print $2 }' "$TMP/load")
    rps=$(awk '/^requests\/s:/ { print $2 }' "$TMP/load")
    [ "${done:-0}" -gt 0 ] || { echo "$url: no request answered" >&2; exit 1; }
    local deltas=()
    for pid in "$@"; do
        deltas+=($((after[i] - before[i])))
        i=$((i + 1))
    done
    awk -v n="$done" -v rps="$rps" -v d="${deltas[*]}" 'BEGIN {
        k = split(d, v, " "); t = 0
        for (j = 1; j <= k; j++) t += v[j]
        printf "%.3f %.0f", t / n / 1e3, rps
        if (k > 1) for (j = 1; j <= k; j++) printf " %.3f", v[j] / n / 1e3
        printf "\n"
    }'
}

# median: of the numbers on stdin, one a line.
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# paired_rounds KEY MODE PATH N WARM: the servers of SERVERS (their ports in
# PORT_OF, their top PIDs in PID_OF, all running at once) take turns: WARM
# requests each, then ROUNDS rounds of N requests each at CONC connections
# (MODE keepalive or close, see measure), the CPU summed over each server's
# process tree. Prints each burst and appends "KEY ROUND SERVER µs/req req/s"
# to $TMP/results.
paired_rounds() {
    local key=$1 mode=$2 path=$3 n=$4 warm=$5 s round us rps
    for s in $SERVERS; do
        MODE=$mode N=$warm WARMUP=0 measure "http://127.0.0.1:${PORT_OF[$s]}$path" "$CONC" \
            "${PID_OF[$s]}" >/dev/null
    done
    echo "$key: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    for round in $(seq "$ROUNDS"); do
        for s in $SERVERS; do
            # shellcheck disable=SC2046 # one argument per PID
            read -r us rps _ < <(MODE=$mode N=$n WARMUP=0 measure \
                "http://127.0.0.1:${PORT_OF[$s]}$path" "$CONC" $(tree_pids "${PID_OF[$s]}"))
            echo "  round $round $s ($(tree_pids "${PID_OF[$s]}" | wc -l) processes): $us us/req, $rps req/s"
            echo "$key $round $s $us $rps" >>"$TMP/results"
        done
    done
}

# ratios_spread KEY A B F: the per-round ratios A/B of column F of the lines
# "KEY ROUND SIDE ..." in $TMP/results, as "median (min-max)" ("-" for none).
ratios_spread() {
    awk -v k="$1" -v a="$2" -v b="$3" -v f="$4" '$1 == k && $3 == a { x[$2] = $f }
        $1 == k && $3 == b { y[$2] = $f }
        END { for (r in x) if (y[r] > 0) print x[r] / y[r] }' "$TMP/results" | sort -n |
        awk '{ v[NR] = $1 } END { if (NR) printf "%.3f (%.3f-%.3f)", v[int((NR + 1) / 2)], v[1], v[NR]; else printf "-" }'
}

# round_col A B S F: the median over the rounds of column F of SERVER S's
# lines "A B ROUND S ..." in $TMP/results (paired_rounds' KEY is "A B").
round_col() {
    awk -v a="$1" -v b="$2" -v s="$3" -v f="$4" '$1 == a && $2 == b && $4 == s { print $f }' \
        "$TMP/results" | median
}

# round_ratios A B S PEER F: the per-round ratios S/PEER of column F, one a line.
round_ratios() {
    awk -v a="$1" -v b="$2" -v s="$3" -v peer="$4" -v f="$5" '$1 == a && $2 == b && $4 == s { x[$3] = $f }
        $1 == a && $2 == b && $4 == peer { y[$3] = $f }
        END { for (r in x) if (y[r] > 0) print x[r] / y[r] }' "$TMP/results"
}
