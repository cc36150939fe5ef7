#!/bin/sh
# Fill fuzz/corpus/<target>/ with seed inputs (not committed: regenerate).
#   tracedat: the shared trace.dat fixtures (v6 and v7, zstd), whole when
#             small and their first 64 KiB (header parts, the first pages)
#             otherwise, and short `cratrace synth kvm-heavy-spin` traces
#             as v6, v7+zstd, v7+zlib and v7 uncompressed
#   xentrace: the shared xen_credit2.bin (first 64 and 256 KiB) and a short
#             `cratrace synth xen-io-billing`
#   perfdata: `perf record -e sched:sched_switch -a -- sleep 0.2` when perf
#             may record (root, or perf_event_paranoid low enough), plus a
#             copy with the sampling cut short
# Usage: fuzz/seed.sh [FIXTURES]   (default ../shared/fixtures from the repo)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
fixtures=${1:-$repo/../shared/fixtures}
corpus=$here/corpus
mkdir -p "$corpus/tracedat" "$corpus/xentrace" "$corpus/perfdata"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# whole file if it is at most 256 KiB, else its head (64 KiB and 256 KiB)
add() { # add TARGET FILE NAME
    size=$(wc -c <"$2")
    if [ "$size" -le 262144 ]; then
        cp "$2" "$corpus/$1/$3"
    else
        head -c 65536 "$2" >"$corpus/$1/$3.head64k"
        head -c 262144 "$2" >"$corpus/$1/$3.head256k"
    fi
}

if [ -d "$fixtures" ]; then
    for f in "$fixtures"/*.dat; do
        [ -e "$f" ] && add tracedat "$f" "$(basename "$f")"
    done
    [ -e "$fixtures/xen_credit2.bin" ] && add xentrace "$fixtures/xen_credit2.bin" xen_credit2.bin
else
    echo "seed.sh: no fixtures at $fixtures; synthetic seeds only" >&2
fi

synth() { PYTHONPATH=$repo ${PYTHON:-python3} -m cratrace synth -q --force --seed 1 "$@"; }
if synth --help >/dev/null 2>&1; then
    spin="--set duration_ms=2 --set vms=1 --set vcpus=2"
    synth kvm-heavy-spin $spin --file-version 6 -o "$tmp/spin.v6.dat"
    synth kvm-heavy-spin $spin --compression zstd -o "$tmp/spin.v7zstd.dat"
    synth kvm-heavy-spin $spin --compression zlib -o "$tmp/spin.v7zlib.dat"
    synth kvm-heavy-spin $spin --compression none -o "$tmp/spin.v7.dat"
    for f in "$tmp"/spin.*.dat; do add tracedat "$f" "synth-$(basename "$f")"; done
    synth xen-io-billing --set duration_ms=3 -o "$tmp/xen-io.bin"
    add xentrace "$tmp/xen-io.bin" synth-xen-io.bin
else
    echo "seed.sh: python -m cratrace synth does not run (is the extension built?); no synthetic seeds" >&2
fi

if command -v perf >/dev/null 2>&1 &&
    perf record -q -o "$tmp/perf.data" -e sched:sched_switch -a -- sleep 0.2 >/dev/null 2>&1; then
    add perfdata "$tmp/perf.data" sched_switch.perf.data
    if perf record -q -o "$tmp/perf2.data" -e sched:sched_switch -e sched:sched_wakeup -c 1 -- sleep 0.05 >/dev/null 2>&1; then
        add perfdata "$tmp/perf2.data" switch_wakeup.perf.data
    fi
else
    echo "seed.sh: perf record failed or is missing; no perf.data seeds" >&2
fi

for t in tracedat xentrace perfdata; do
    echo "$t: $(ls "$corpus/$t" | wc -l) seeds, $(du -sh "$corpus/$t" | cut -f1)"
done
