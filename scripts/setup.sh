#!/usr/bin/env bash
# Install everything cratrace and its tests need, from this checkout's own
# files: Debian packages (trace-cmd, libtracecmd, perf, xenalyze, chromium),
# then a virtual environment, .venv, with the Python package in it (which
# builds the Rust core with maturin). The system Python is left alone (Debian
# 12's refuses `pip install` outside a virtual environment anyway).
#
#   bash scripts/setup.sh [EXTRAS]     e.g. `test`, `docs,perfetto`
#
# Then run `.venv/bin/cratrace`, or `source .venv/bin/activate` first.
# Idempotent; skips what is already there. Needs root for apt-get.
# Environment: PYTHON (the interpreter that creates the venv, default
# python3), CRATRACE_VENV (its directory, default .venv), CRATRACE_LOG_DIR
# (where the build's full output is kept, default test-logs).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${CRATRACE_VENV:-.venv}
LOGS=${CRATRACE_LOG_DIR:-test-logs}

APT_PACKAGES=(trace-cmd libtracecmd-dev libtraceevent-dev xen-utils-common linux-perf chromium zstd gcc)
# Debian splits venv's pip bootstrap (ensurepip) into python3-venv
if [ ! -x "$VENV/bin/python" ] && ! "$PY" -c "import ensurepip, venv" >/dev/null 2>&1; then
    APT_PACKAGES+=(python3-venv)
fi
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

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating the virtual environment $VENV ($("$PY" --version 2>&1))"
    "$PY" -m venv "$VENV" || {
        echo "setup: \`$PY -m venv\` failed; on Debian/Ubuntu install python3-venv (apt-get install python3-venv) and run again" >&2
        exit 1
    }
fi

# pip's full output (the Rust build's included) goes to a log; the terminal
# gets a line every 10 s with the time so far and what is being done
mkdir -p "$LOGS"
log="$LOGS/setup-$(date -u +%Y%m%d-%H%M%S).log"
extras=${1:-}
echo "setup: building and installing cratrace into $VENV (Rust core via maturin; a first build takes minutes)${extras:+ with [$extras]}; full output: $log"
"$VENV/bin/python" -m pip install -v --disable-pip-version-check -e ".${extras:+[$extras]}" >"$log" 2>&1 &
pid=$!
start=$SECONDS
last=$SECONDS
while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS - last >= 10)); then
        last=$SECONDS
        crates=$(grep -c '^ *Compiling ' "$log" || true)
        doing=$(grep -E '^ *(Compiling|Collecting|Downloading|Building|Installing|Finished|Running|Successfully)|📦|🔗|🍹|maturin' "$log" | tail -n 1 | sed -e 's/^ *//' | cut -c1-100 || true)
        printf 'setup: %dm%02ds: %s crates compiled; %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$crates" "${doing:-starting}"
    fi
done
status=0
wait "$pid" || status=$?
if [ "$status" != 0 ]; then
    echo "setup: pip install failed (exit $status) after $((SECONDS - start)) s; the end of $log:" >&2
    tail -n 60 "$log" >&2
    exit "$status"
fi
echo "setup: installed in $((SECONDS - start)) s: $("$VENV/bin/python" -c 'import cratrace; print("cratrace", cratrace.__version__, "from", cratrace.__file__)')"
