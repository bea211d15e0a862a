#!/usr/bin/env bash
# 40 hot replaces with --max-generations 4 under load: requests lost, re-execs, final RSS.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Needs: cargo build --release, and the hot test plugins (cargo build -p stoa-test-hot-v1 -p stoa-test-hot-v2).
D=$(mktemp -d /tmp/r40.XXXX); mkdir -p $D/apps
cp $ROOT/target/release/libarticle.so $D/apps/
cp $ROOT/target/debug/libstoa_test_hot_v1.so $D/apps/libhot.so
$ROOT/target/release/stoa --apps $D/apps --bind 127.0.0.1:18200 --workers 1 --max-generations 4 --graceful-timeout 5 --log-level info >$D/out 2>$D/err &
sleep 2
$ROOT/target/release/stoa-bench load -k -c 10 -d 100s --max-time 110s http://127.0.0.1:18200/article > $D/load 2>&1 &
LOAD=$!
for i in $(seq 1 40); do
  if [ $((i % 2)) -eq 1 ]; then v=v2; else v=v1; fi
  cp $ROOT/target/debug/libstoa_test_hot_$v.so $D/apps/.libhot.so && mv $D/apps/.libhot.so $D/apps/libhot.so
  for t in $(seq 1 100); do
    body=$(curl -s -m 2 127.0.0.1:18200/hot); [ "$body" = "$v" ] && break; sleep 0.1
  done
  [ "$body" = "$v" ] || echo "replace $i: /hot answered '$body', wanted $v"
done
kill -INT $LOAD; wait $LOAD 2>/dev/null
echo "re-execs: $(grep -c 'upgrade: the new stoa' $D/err)"
PID=$(grep 'upgrade: the new stoa' $D/err | tail -1 | sed 's/.*(pid \([0-9]*\)).*/\1/')
echo "final pid $PID serves /hot: $(curl -s 127.0.0.1:18200/hot)"
grep -E "VmRSS" /proc/$PID/status
tail -15 $D/load
kill $PID 2>/dev/null
# fresh start for comparison
$ROOT/target/release/stoa --apps $D/apps --bind 127.0.0.1:18201 --workers 1 --log-level warn >/dev/null 2>&1 &
F=$!; sleep 2; $ROOT/target/release/stoa-bench load -k -c 10 -n 20000 http://127.0.0.1:18201/article >/dev/null 2>&1
echo "fresh: $(grep VmRSS /proc/$F/status)"; kill $F
