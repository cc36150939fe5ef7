#!/usr/bin/env bash
# The whole test suite, Rust and Python, after installing what it needs.
# This is the command the README documents and .ci/run calls.
#
# The full output of every step (lint, cargo test, pytest) is kept in
# test-logs/test-<time>.log (CRATRACE_LOG_DIR); the terminal gets each
# step's summary and every failure. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test

VENV=${CRATRACE_VENV:-.venv}
LOGS=${CRATRACE_LOG_DIR:-test-logs}
mkdir -p "$LOGS"
log="$LOGS/test-$(date -u +%Y%m%d-%H%M%S).log"
ln -sfn "$(basename "$log")" "$LOGS/test-latest.log"
# the venv's commands (cratrace, cratrace-collect) before any other
export PATH="$PWD/$VENV/bin:$PATH"
echo "== full output: $log"

# On the sandboxed VMs this project is developed on, trace-cmd needs a few
# tracefs control files covered; on a normal host this script is absent.
if [ -x ../shared/sandbox/enable-tracing.sh ] && [ "$(id -u)" = 0 ]; then
    ../shared/sandbox/enable-tracing.sh >>"$log" 2>&1 || true
fi

# section NAME: a header in the log and on the terminal
section() {
    echo "== $1"
    printf '\n===== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)" >>"$log"
}

section "lint (rustfmt, clippy)"
if ! cargo fmt --all --check >>"$log" 2>&1; then
    echo "rustfmt: not in rustfmt's style (run cargo fmt --all); the diff:" >&2
    sed -n '/^===== lint/,$p' "$log" | tail -n +2 | head -n 80 >&2
    exit 1
fi
if cargo clippy --version >/dev/null 2>&1; then
    # clippy checks every crate first: each is named as it goes (progress)
    set +e
    cargo clippy --workspace --all-targets -- -D warnings 2>&1 | tee -a "$log" | grep --line-buffered -E '^ *(Checking|Compiling|Finished) '
    status=${PIPESTATUS[0]}
    set -e
    if [ "$status" != 0 ]; then
        echo "clippy failed; what it said:" >&2
        sed -n '/^===== lint/,$p' "$log" | grep -vE '^ *(Checking|Compiling|Finished) ' >&2
        exit 1
    fi
else
    echo "clippy is not installed: lint skipped" | tee -a "$log"
fi

section "cargo test (pure-Rust crates)"
# Everything to the log; to the terminal each crate compiled (progress),
# each test binary's result line and every failure.
set +e
cargo test --release --workspace --exclude cratrace-py 2>&1 | tee -a "$log" |
    grep --line-buffered -E '^ *(Compiling|Finished|Running|Doc-tests) |^test result:|FAILED|panicked|^error|^failures:'
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then
    if grep -q '^failures:$' "$log"; then
        echo "cargo test failed (exit $status); failures as the log has them:" >&2
        sed -n '/^failures:$/,/^test result:/p' "$log" >&2
    else  # it did not build (or died before a test binary finished)
        echo "cargo test failed (exit $status); the end of its output:" >&2
        tail -n 80 "$log" >&2
    fi
    echo "full output: $log" >&2
    exit "$status"
fi

section "pytest ($VENV/bin/python)"
set +e
"$VENV/bin/python" -m pytest -q "$@" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
set -e
echo "== full output: $log"
exit "$status"
