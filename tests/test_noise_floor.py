"""The fidelity gate against the noise floor (benchmarks/replay_fidelity.py):
a replay passes for a setting when its errors against its own recordings
are no wider, in median and p90, than the recordings' differences from
each other."""

from __future__ import annotations

from benchmarks.replay_fidelity import noise_floor


def _run(cpu: float, tput: float, err_cpu: float, err_tput: float, per_useful: float = 1.2, replayed_per_useful: float = 1.2) -> dict:
    return {
        "vcpus": {"vm0/0": cpu, "vm0/1": 1.0},
        "vms": {"vm0": {"recorded_throughput_per_s": tput, "replayed_throughput_per_s": tput, "recorded_cpu_per_useful": per_useful, "replayed_cpu_per_useful": replayed_per_useful}},
        "cpu_time_err_pct": err_cpu,
        "throughput_err_pct": err_tput,
    }


def test_replays_closer_than_the_recordings_are_to_each_other_pass():
    runs = [_run(1.0, 100, 2, 1, 1.2), _run(1.2, 120, 3, 2, 1.3), _run(0.8, 90, 1, 1, 1.1)]
    fl = noise_floor(runs)
    cpu = fl["measures"]["worst-thread CPU time"]
    # pairs (ordered): |1.2-1|/1=20, |1-1.2|/1.2=16.7, |.8-1|/1=20, |1-.8|/.8=25, |.8-1.2|/1.2=33.3, |1.2-.8|/.8=50
    assert cpu["recordings_median_pct"] == 22.5 and cpu["recordings_p90_pct"] == 33.33
    assert cpu["replay_median_pct"] == 2 and cpu["replay_p90_pct"] == 3
    assert cpu["median_ratio"] == round(2 / 22.5, 2) and cpu["within"]
    assert fl["within"]


def test_a_replay_farther_from_its_recording_than_the_recordings_differ_fails():
    runs = [_run(1.0, 100, 30, 1), _run(1.01, 100, 40, 1)]
    fl = noise_floor(runs)
    assert not fl["measures"]["worst-thread CPU time"]["within"] and not fl["within"]
    # identical recordings and exact replays: within (no spread, no error)
    same = noise_floor([_run(1.0, 100, 0, 0), _run(1.0, 100, 0, 0)])
    assert same["measures"]["worst-VM throughput"]["within"]
    assert noise_floor([_run(1.0, 100, 0, 0)]) is None
