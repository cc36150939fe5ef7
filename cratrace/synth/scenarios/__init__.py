"""The scenario registry: name -> module (see ``_common`` for the contract)."""

from __future__ import annotations

from types import ModuleType

from cratrace.synth.scenarios import gang, hetero, kvm_heavy_spin, kvm_io_billing, kvm_postcopy, thermal, xen_io_billing

SCENARIOS: dict[str, ModuleType] = {
    m.NAME: m for m in (kvm_heavy_spin, kvm_io_billing, kvm_postcopy, xen_io_billing, hetero, thermal, gang)
}
