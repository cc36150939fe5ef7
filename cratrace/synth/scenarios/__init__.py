"""Scenarios: name → generator. Each takes keyword parameters and a seed,
writes a trace file and returns its ground truth (saved as FILE.truth.json)."""

from cratrace.synth.scenarios import kvm_heavy_spin

SCENARIOS = {"kvm-heavy-spin": kvm_heavy_spin}
