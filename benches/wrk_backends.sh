#!/usr/bin/env bash
# wrk on /hello/ (and /article) for each backend, server on CPU 0, wrk on CPU 1.
set -u
cd "$(dirname "$0")/.."
APPS=$(mktemp -d)
cp target/release/lib{hello_project,article,environ,demo}.so "$APPS/"
for p in epoll poll select; do
  taskset -c 0 target/release/stoa --bind 127.0.0.1:0 --apps "$APPS" --poller $p --workers 1 > "$APPS/wt.out" 2>"$APPS/wt-$p.err" &
  pid=$!
  for i in $(seq 50); do grep -q listening "$APPS/wt.out" 2>/dev/null && break; sleep 0.1; done
  port=$(grep -o '[0-9]*$' "$APPS/wt.out")
  for c in 100 1000; do
    for path in /hello/ /article; do
      r=$(taskset -c 1 wrk -t1 -c$c -d10s http://127.0.0.1:$port$path | awk '/Requests\/sec/ {print $2} /Non-2xx|Socket errors/ {print "ERR:" $0}')
      echo "$p c=$c $path $r"
    done
  done
  kill $pid; wait $pid 2>/dev/null
done
