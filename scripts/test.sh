#!/usr/bin/env bash
# The whole test suite, Rust and Python, after installing what it needs.
# This is the command the README documents and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test

# On the sandboxed VMs this project is developed on, trace-cmd needs a few
# tracefs control files covered; on a normal host this script is absent.
if [ -x ../shared/sandbox/enable-tracing.sh ] && [ "$(id -u)" = 0 ]; then
    ../shared/sandbox/enable-tracing.sh || true
fi

echo "== lint (rustfmt, clippy)"
cargo fmt --all --check
if cargo clippy --version >/dev/null 2>&1; then
    cargo clippy --workspace --all-targets -q -- -D warnings
else
    echo "clippy is not installed: lint skipped"
fi

echo "== cargo test (pure-Rust crates)"
cargo test --release --workspace --exclude cratrace-py -q 2>&1 | tail -n 40
status=${PIPESTATUS[0]}
[ "$status" = 0 ] || { echo "cargo test failed" >&2; exit "$status"; }

echo "== pytest"
python3 -m pytest -q "$@"
