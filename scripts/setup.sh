#!/usr/bin/env bash
# Install everything cratrace and its tests need, from this checkout's own
# files: Debian packages (trace-cmd, libtracecmd, perf, xenalyze, chromium),
# then the Python package (which builds the Rust core with maturin).
# Idempotent; skips what is already there. Needs root for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(trace-cmd libtracecmd-dev libtraceevent-dev xen-utils-common linux-perf chromium zstd gcc)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ]; then
        echo "setup: installing Debian packages: ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "setup: missing Debian packages (need root to install): ${missing[*]}" >&2
    fi
fi

PY=${PYTHON:-python3}
extras=${1:-}
echo "setup: building and installing cratrace (Rust core via maturin)${extras:+ with [$extras]}"
"$PY" -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}"
