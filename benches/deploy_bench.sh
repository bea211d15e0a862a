#!/usr/bin/env bash
# The seeds' deployment table: one Stoa worker, --workers 2, nginx -> 2 Stoa,
# HAProxy -> 2 Stoa; ab -n 20000 -c 50 on /hello/, without and with keep-alive.
set -u
cd "$(dirname "$0")/.."
T=$(mktemp -d /tmp/stoa-deploy.XXXX)
mkdir -p $T/apps $T/logs $T/temp
cp target/release/lib{hello_project,article}.so $T/apps/
PIDS=()
start_stoa() { # port workers
  target/release/stoa --bind 127.0.0.1:$1 --apps $T/apps --workers $2 --log-level warn > $T/stoa-$1.out 2>&1 &
  PIDS+=($!)
  for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$1/hello/ -H 'Host: localhost' && return; sleep 0.1; done
}
measure() { # name url
  local a k
  a=$(ab -q -n 20000 -c 50 -H 'Host: localhost' "$2" 2>&1 | awk '/Requests per second/ {print $4} /Failed requests/ {if ($3>0) print "FAILED:"$3} /Non-2xx/ {print "NON2XX:"$3}' | tr '\n' ' ')
  k=$(ab -q -k -n 20000 -c 50 -H 'Host: localhost' "$2" 2>&1 | awk '/Requests per second/ {print $4} /Failed requests/ {if ($3>0) print "FAILED:"$3} /Non-2xx/ {print "NON2XX:"$3}' | tr '\n' ' ')
  echo "| $1 | $a | $k |"
}
stop_all() { for p in "${PIDS[@]}"; do kill $p 2>/dev/null; wait $p 2>/dev/null; done; PIDS=(); }

start_stoa 18101 1; measure "Stoa, 1 worker" http://127.0.0.1:18101/hello/; stop_all
start_stoa 18102 2; measure "Stoa, --workers 2" http://127.0.0.1:18102/hello/; stop_all

start_stoa 18111 1; start_stoa 18112 1
sed -e 's/server 127.0.0.1:8001 /server 127.0.0.1:18111 /; s/server 127.0.0.1:8002 /server 127.0.0.1:18112 /; /127.0.0.1:8003/d; /127.0.0.1:8004/d' \
    -e 's/listen 8080;/listen 127.0.0.1:18180;/' -e 's|access_log logs/access.log;|access_log off;|' deploy/nginx.conf > $T/nginx.conf
nginx -p $T -c $T/nginx.conf -g 'daemon off;' > $T/nginx.out 2>&1 &
NGX=$!
sleep 0.5
measure "nginx -> 2 Stoa (1 worker each)" http://127.0.0.1:18180/hello/
kill $NGX; wait $NGX 2>/dev/null

sed -e 's/server stoa1 127.0.0.1:8001/server stoa1 127.0.0.1:18111/; s/server stoa2 127.0.0.1:8002/server stoa2 127.0.0.1:18112/; /stoa3/d; /stoa4/d' \
    -e 's/bind :8080/bind 127.0.0.1:18181/' deploy/haproxy.cfg > $T/haproxy.cfg
haproxy -f $T/haproxy.cfg > $T/haproxy.out 2>&1 &
HAP=$!
sleep 2.5
measure "HAProxy -> 2 Stoa (1 worker each)" http://127.0.0.1:18181/hello/
kill $HAP; wait $HAP 2>/dev/null
stop_all
echo done
