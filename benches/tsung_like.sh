#!/usr/bin/env bash
# The seed's tsung experiment with stoa-bench's think-time mode: 500, 1,000
# and 2,000 concurrent users (each: one keep-alive connection, 5 requests
# with 0.5-2 s of think time between them, then the next user arrives),
# against one Stoa directly and through nginx and HAProxy in front of 4 Stoa
# instances (--workers 1 each). Servers and balancers on CPU 0, the load on
# CPU 1. Writes benches/results/tsung-like.md.
#   POINT=20s USERS="500 1000 2000" benches/tsung_like.sh
set -u
cd "$(dirname "$0")/.."
POINT=${POINT:-20s}
USERS=${USERS:-500 1000 2000}
THINK=${THINK:-500ms..2s}
PER_SESSION=${PER_SESSION:-5}
OUT=${OUT:-benches/results/tsung-like.md}
BENCH=target/release/stoa-bench
for f in target/release/stoa $BENCH target/release/lib{hello_project,article}.so; do
  [ -e "$f" ] || { echo "missing $f: cargo build --release" >&2; exit 1; }
done
# Every user holds a connection; the balancers hold two per user.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 65536
T=$(mktemp -d /tmp/stoa-tsung.XXXX)
mkdir -p $T/apps $T/logs $T/temp
cp target/release/lib{hello_project,article}.so $T/apps/
PIDS=()
stop_all() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; PIDS=(); }
trap 'stop_all; rm -rf $T' EXIT
start_stoa() { # port
  taskset -c 0 target/release/stoa --bind 127.0.0.1:$1 --apps $T/apps --workers 1 \
    --trusted-proxy 127.0.0.1/32 --log-level warn > $T/stoa-$1.out 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$1/hello/ && return; sleep 0.1; done
  echo "stoa on $1 did not start" >&2; cat $T/stoa-$1.out >&2; exit 1
}
ROWS=()
measure() { # setup url
  local u row
  for u in $USERS; do
    row=$($BENCH load --users "$u" --think "$THINK" --session-requests "$PER_SESSION" \
      -d "$POINT" -t 1 --cpus 1 --timeout 10s "$2" | sed -n 's/^row: //p')
    echo "| $1 $row" | tee -a $T/rows
    sleep 2
  done
}

start_stoa 18201
measure "Stoa, 1 instance" http://127.0.0.1:18201/hello/
stop_all

for port in 18211 18212 18213 18214; do start_stoa $port; done
sed -e 's/127.0.0.1:8001 /127.0.0.1:18211 /; s/127.0.0.1:8002 /127.0.0.1:18212 /' \
    -e 's/127.0.0.1:8003 /127.0.0.1:18213 /; s/127.0.0.1:8004 /127.0.0.1:18214 /' \
    -e 's/worker_processes auto;/worker_processes 1;/' \
    -e 's/listen 8080;/listen 127.0.0.1:18280;/' -e 's|access_log logs/access.log;|access_log off;|' \
    deploy/nginx.conf > $T/nginx.conf
taskset -c 0 nginx -p $T -c $T/nginx.conf -g 'daemon off;' > $T/nginx.out 2>&1 &
NGX=$!
sleep 0.5
measure "nginx -> 4 Stoa" http://127.0.0.1:18280/hello/
kill $NGX; wait $NGX 2>/dev/null
NGX_ERRORS=$(cat $T/logs/error.log 2>/dev/null | grep -c .)
NGX_FIRST=$(head -1 $T/logs/error.log 2>/dev/null | cut -c1-200)

sed -e 's/127.0.0.1:8001/127.0.0.1:18211/; s/127.0.0.1:8002/127.0.0.1:18212/' \
    -e 's/127.0.0.1:8003/127.0.0.1:18213/; s/127.0.0.1:8004/127.0.0.1:18214/' \
    -e 's/bind :8080/bind 127.0.0.1:18281/' deploy/haproxy.cfg > $T/haproxy.cfg
taskset -c 0 haproxy -f $T/haproxy.cfg > $T/haproxy.out 2>&1 &
HAP=$!
sleep 2.5
measure "HAProxy -> 4 Stoa" http://127.0.0.1:18281/hello/
kill $HAP; wait $HAP 2>/dev/null
stop_all

{
  echo "# Think-time users (the seed's tsung experiment)"
  echo
  echo "$(nproc) CPUs, $(uname -sr); every Stoa with \`--workers 1\` (default poller); Stoa, nginx"
  echo "(1 worker process) and HAProxy pinned to CPU 0, stoa-bench (1 thread) to CPU 1. Each user:"
  echo "one keep-alive connection, $PER_SESSION requests to \`/hello/\` with a uniform $THINK think time"
  echo "between them, then it closes and the next user arrives; the first users arrive spread over"
  echo "the longest think time. $POINT per point. Latency of every answered request (a session's"
  echo "first request includes its connect). Configs: deploy/nginx.conf and deploy/haproxy.cfg"
  echo "with the ports changed and nginx's access log off."
  echo
  echo '```sh'
  echo "POINT=$POINT USERS=\"$USERS\" benches/tsung_like.sh"
  echo "stoa-bench load --users N --think $THINK --session-requests $PER_SESSION -d $POINT -t 1 --cpus 1 --timeout 10s URL"
  echo '```'
  echo
  echo "| setup | users | requests | 2xx | 2xx/s | p50 ms | p90 ms | p99 ms | refused | reset | timeout | 502 | 504 | other non-2xx | other |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  cat $T/rows
  echo
  echo "nginx error log lines during its points: $NGX_ERRORS${NGX_FIRST:+ (first: \`$NGX_FIRST\`)}"
} > "$OUT"
cat "$OUT"
