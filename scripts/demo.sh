#!/usr/bin/env bash
# The first five minutes: install, then run the whole pipeline on a bundled
# sample capture: import → model → replay under several policies → report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the cratrace that setup.sh installed into the virtual environment
export PATH="$PWD/${CRATRACE_VENV:-.venv}/bin:$PATH"
out=${1:-demo-out}
rm -rf "$out" && mkdir -p "$out"
cratrace import sample-traces/lab-kvm-sched -o "$out/capture" --quiet
cratrace info "$out/capture"
cratrace model "$out/capture"
cratrace replay "$out/capture" -o "$out/replays" -p eevdf -p fair -p yield -p wapd -p wopd -p rslp -p credit -p fair+energy-balance -p asymmetric+yield --set fast_cores=1 --set class.vm0=cpu || true  # exit 1 = fidelity gate missed; the report says by how much
cratrace report "$out/capture" --replays "$out/replays" -o "$out/report.html" --tables "$out/tables"
echo "demo: report at $(cd "$out" && pwd)/report.html (tables in $out/tables)"
