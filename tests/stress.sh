#!/usr/bin/env bash
# Flake hunt: runs the end-to-end suites (the main one and the WSGI
# bridge's, against the release build) N times in a row beside a CPU hog,
# as a fresh, busy machine runs them, and keeps going after a failure.
# Each run's output goes to a file; the failing tests of every run are
# listed at the end, with how many runs passed.
#
# Usage: tests/stress.sh [N]   (N: 5 by default)
#   env: HOG ("stress-ng --cpu 2" when stress-ng is installed, else two
#   `yes > /dev/null`; "none" for no hog), OUT (a directory for the logs,
#   a new temp dir by default), SUITES ("main bridge").
# The hog runs at the same niceness as the tests and is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-5}
case $runs in
    '' | *[!0-9]*)
        echo "tests/stress.sh: N must be a whole number, not '$runs'" >&2
        exit 2
        ;;
esac
OUT=${OUT:-$(mktemp -d /tmp/stoa-stress.XXXXXX)}
SUITES=${SUITES:-main bridge}
mkdir -p "$OUT"

hog_pids=()
stop_hog() {
    for p in "${hog_pids[@]}"; do
        kill "$p" 2>/dev/null || true
    done
}
trap stop_hog EXIT
hog=${HOG:-}
if [ -z "$hog" ]; then
    if command -v stress-ng >/dev/null; then hog="stress-ng --cpu 2 --quiet"; else hog=yes; fi
fi
case $hog in
    none) echo "tests/stress.sh: no CPU hog" ;;
    yes)
        for _ in 1 2; do
            yes >/dev/null &
            hog_pids+=($!)
        done
        echo "tests/stress.sh: CPU hog: two 'yes > /dev/null'"
        ;;
    *)
        $hog &
        hog_pids+=($!)
        echo "tests/stress.sh: CPU hog: $hog"
        ;;
esac

suite() {
    case $1 in
        main) cargo test --release -p stoa --test e2e ;;
        bridge) cargo test --release --manifest-path sample-apps/python/Cargo.toml --test e2e ;;
        *)
            echo "tests/stress.sh: unknown suite '$1' (main, bridge)" >&2
            return 2
            ;;
    esac
}

# Build once, before the hog matters and outside the timed runs.
for s in $SUITES; do
    case $s in
        main) cargo test --release -p stoa --test e2e --no-run ;;
        bridge) cargo test --release --manifest-path sample-apps/python/Cargo.toml --test e2e --no-run ;;
    esac
done

passed=0
failed=0
for run in $(seq 1 "$runs"); do
    ok=1
    for s in $SUITES; do
        log="$OUT/run$run-$s.log"
        start=$(date +%s)
        if suite "$s" >"$log" 2>&1; then
            echo "tests/stress.sh: run $run $s: passed in $(($(date +%s) - start)) s"
        else
            ok=0
            echo "tests/stress.sh: run $run $s: FAILED in $(($(date +%s) - start)) s ($log)"
            grep -E '^test .* FAILED$' "$log" | sed 's/^/    /' || true
        fi
    done
    if [ $ok = 1 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
echo "tests/stress.sh: logs in $OUT"
echo "stress: $passed passed, $failed failed"
[ "$failed" = 0 ]
