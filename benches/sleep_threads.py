"""The sleep experiment from a threaded Python client: THREADS threads share
N requests (one connection each, like `ab` without -k) to URL, and print
req/s, the total time and the p50/p99 latency.

    python3 benches/sleep_threads.py http://127.0.0.1:8000/demo/syncsleep-handler/ [N] [THREADS]

Defaults: 200 requests, 40 threads. Exits 1 if any answer is not 200.
"""

import sys
import threading
import time
import urllib.request


def main():
    url = sys.argv[1]
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    left = [total]
    lock = threading.Lock()
    times, failures = [], []

    def worker():
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            start = time.monotonic()
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    r.read()
                    ok = r.status == 200
            except Exception as e:  # counted, and named below
                ok, r = False, e
            took = time.monotonic() - start
            with lock:
                times.append(took)
                if not ok:
                    failures.append(repr(r))

    begin = time.monotonic()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.monotonic() - begin
    times.sort()
    pct = lambda p: times[min(len(times) - 1, int(len(times) * p))] * 1000
    print(
        f"{total / elapsed:.2f} req/s, {elapsed:.2f} s, "
        f"p50 {pct(0.50):.0f} ms, p99 {pct(0.99):.0f} ms, {len(failures)} failed"
    )
    if failures:
        print("first failure:", failures[0], file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
