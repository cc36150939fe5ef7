#!/usr/bin/env bash
# The first five minutes: install, import a bundled sample trace and show
# what is in it. Grows with each stage of the pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out=${1:-demo-out}
rm -rf "$out" && mkdir -p "$out"
sample=sample-traces/lab-kvm-sched
src=$(ls "$sample"/trace.dat 2>/dev/null || ls sample-traces/*.dat | head -n 1)
cratrace import "$src" -o "$out/capture" --force
cratrace info "$out/capture"
echo "demo: capture at $out/capture"
