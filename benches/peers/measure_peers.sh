#!/usr/bin/env bash
# Stoa against a single Tornado process (/hello/) and Go net/http with
# GOMAXPROCS=1 (/article), each on CPU 0 with wrk/ab on CPU 1, runs taken in
# turns; prints one line per run. Only 127.0.0.1; PIDs started here only.
#   Needs: cargo build --release; wrk, ab; python3 with tornado; go.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=${REL:-$ROOT/target/release}
RUNS=${RUNS:-3}
T=$(mktemp -d /tmp/stoa-peers.XXXX)
mkdir -p "$T/apps"
cp "$REL"/lib{hello_project,article}.so "$T/apps/"
(cd "$T" && cp "$ROOT/benches/peers/go_article.go" . && go build -o go_article go_article.go)

wait_up() { for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; return 1; }
wrk_rps() { taskset -c 1 wrk -t1 -c100 -d10s "$1" | awk '/Requests\/sec/ {print $2}'; }
ab_rps() { taskset -c 1 ab -q -n 20000 -c 100 "$1" 2>&1 | awk '/Requests per second/ {print $4}'; }

taskset -c 0 "$REL/stoa" --bind 127.0.0.1:18301 --apps "$T/apps" --workers 1 --log-level warn & S=$!
taskset -c 0 python3 "$ROOT/benches/peers/tornado_sleep.py" 18302 & P=$!
GOMAXPROCS=1 taskset -c 0 "$T/go_article" 127.0.0.1:18303 & G=$!
wait_up http://127.0.0.1:18301/article; wait_up http://127.0.0.1:18302/hello/; wait_up http://127.0.0.1:18303/article
for run in $(seq "$RUNS"); do
  echo "run $run keepalive /hello/ stoa $(wrk_rps http://127.0.0.1:18301/hello/) tornado $(wrk_rps http://127.0.0.1:18302/hello/)"
  echo "run $run close /hello/ stoa $(ab_rps http://127.0.0.1:18301/hello/) tornado $(ab_rps http://127.0.0.1:18302/hello/)"
  echo "run $run keepalive /article stoa $(wrk_rps http://127.0.0.1:18301/article) go $(wrk_rps http://127.0.0.1:18303/article)"
  echo "run $run close /article stoa $(ab_rps http://127.0.0.1:18301/article) go $(ab_rps http://127.0.0.1:18303/article)"
done
kill $S $P $G; wait $S $P $G 2>/dev/null
rm -rf "$T"
