# Helpers sourced by benches/peers/cpu_vs_peers.sh and cpu_paired.sh, after
# benches/cpu_lib.sh, with ROOT and REL set: the servers' defaults, the
# checks and scratch directory (peers_setup), and starting one server of a
# kind (stoa-POLLER, nginx, hyper) pinned to CPU 0.

CONCS=${CONCS:-10,100,1000}
BENCH=${BENCH:-$REL/stoa-bench}
HYPER=${HYPER:-$REL/hyper-article}
NGINX=${NGINX:-nginx}
SERVERS=${SERVERS:-stoa-epoll:/article stoa-epoll:/hello/ stoa-poll:/article nginx:/article hyper:/article}

# peers_setup NAME: checks that every binary SERVERS needs is there and both
# CPUs are usable, raises the descriptor limit, and makes TMP (removed at
# exit) with the sample apps in $TMP/apps.
peers_setup() {
    PATH=$PATH:/usr/sbin
    need taskset "util-linux"
    local f
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
    TMP=$(mktemp -d "/tmp/$1.XXXXXX")
    trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
    mkdir -p "$TMP/apps" "$TMP/nginx/tmp"
    cp "$REL"/lib{article,hello_project}.so "$TMP/apps/"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_nginx: the config template (NGINX_CONF, default nginx-article.conf)
# on a free port, @CERT@ and @KEY@ replaced by TLS_CERT and TLS_KEY; sets
# SERVER_PID (master), SERVER_PORT and CPU_PIDS (master and worker).
start_nginx() {
    local port worker
    for _ in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 40000))
        port_open "$port" && continue
        sed -e "s|@DIR@|$TMP/nginx|g" -e "s|@PORT@|$port|g" \
            -e "s|@CERT@|${TLS_CERT:-}|g" -e "s|@KEY@|${TLS_KEY:-}|g" \
            "${NGINX_CONF:-$ROOT/benches/peers/nginx-article.conf}" >"$TMP/nginx/nginx.conf"
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
        # Every process of it: the supervisor and its worker (process mode).
        stoa-*)
            start_stoa "$REL/stoa" "${1#stoa-}"
            CPU_PIDS=$(tree_pids "$SERVER_PID" | tr '\n' ' ')
            return
            ;;
        hyper) start_server "$HYPER" 127.0.0.1:0 ;;
        nginx) start_nginx; return ;;
        *) echo "unknown server $1" >&2; exit 1 ;;
    esac
    CPU_PIDS=$SERVER_PID
}

