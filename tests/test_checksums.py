"""The checksum capture.json records for each source: BLAKE3 for a file
imported on its own (held to the BLAKE3 specification's test vectors),
SHA-256 for a file of a raw capture (checked against its manifest)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cratrace import _native
from cratrace.importer import write_capture

# From the BLAKE3 specification's test_vectors.json (first 32 bytes of the
# "hash" output): the input of each case is the bytes 0, 1, ..., 250
# repeated to `input_len`. Lengths around the 1 KiB chunk and across
# several chunks exercise the tree, not just one compression.
SPEC_VECTORS = {
    0: "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
    1: "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213",
    1024: "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7",
    1025: "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444",
    8193: "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b",
    102400: "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085",
}

RAW = Path(__file__).resolve().parents[1] / "sample-traces" / "lab-kvm-sched"


@pytest.mark.parametrize("length", sorted(SPEC_VECTORS))
def test_file_blake3_matches_the_specification(tmp_path, length):
    f = tmp_path / "input.bin"
    f.write_bytes(bytes(i % 251 for i in range(length)))
    assert _native.file_blake3(f) == SPEC_VECTORS[length]


def test_file_blake3_reads_past_its_buffer(tmp_path):
    # 2.5 MiB: three reads of its 1 MiB buffer, the last a partial one; one
    # byte changed in the last read changes the digest
    data = bytearray(i % 251 for i in range(5 << 19))
    f = tmp_path / "big.bin"
    f.write_bytes(bytes(data))
    whole = _native.file_blake3(f)
    data[-7] ^= 1
    f.write_bytes(bytes(data))
    assert _native.file_blake3(f) != whole and len(whole) == 64


def test_a_missing_file_is_an_os_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.bin"):
        _native.file_blake3(tmp_path / "nope.bin")


def test_a_raw_capture_records_the_sha256_its_manifest_gave(tmp_path):
    manifest = json.loads((RAW / "manifest.json").read_text())
    meta = write_capture([RAW], tmp_path / "cap")
    listed = {f["path"]: f["sha256"] for f in manifest["files"] if f.get("sha256")}
    assert listed, "the shipped raw capture lists checksums"
    for s in meta["sources"]:
        name = Path(s["path"]).name
        assert s["sha256"] == listed[name] == hashlib.sha256(Path(s["path"]).read_bytes()).hexdigest()
        assert "blake3" not in s
