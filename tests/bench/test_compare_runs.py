"""bench/compare_runs.py: where two runs' checkpoints part, on real checkpoint files."""

from __future__ import annotations

import torch

from bench.compare_runs import compare, max_abs_diff
from rl_system.checkpoint.format import checkpoint_name, encode


def _write(folder, version: int, weight: float, steps: int) -> None:
    state = {"learner": {"model": {"w": torch.full((3,), weight)}, "optimizer": {"state": {}, "lr": 1e-3},
                         "env_steps": steps, "version": version}}
    header, payload, _ = encode(state, {"policy_version": version, "env_steps": steps})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / checkpoint_name(version)).write_bytes(bytes(header) + bytes(payload))


def test_the_first_version_where_two_runs_differ_is_found(tmp_path):
    for version, (wa, wb) in {5: (1.0, 1.0), 10: (2.0, 2.0), 15: (3.0, 3.5)}.items():
        _write(tmp_path / "a" / "checkpoints", version, wa, version * 100)
        _write(tmp_path / "b" / "checkpoints", version, wb, version * 100)
    _write(tmp_path / "b" / "checkpoints", 20, 4.0, 2000)  # kept by one run only: not compared
    rows = compare(tmp_path / "a", tmp_path / "b")
    assert [(v, s, dw) for v, s, dw, _ in rows] == [(5, 500, 0.0), (10, 1000, 0.0), (15, 1500, 0.5)]


def test_a_structural_difference_is_infinite():
    assert max_abs_diff({"w": torch.zeros(2)}, {"w": torch.zeros(3)}) == float("inf")
    assert max_abs_diff({"w": torch.zeros(2)}, {"v": torch.zeros(2)}) == float("inf")
    assert max_abs_diff({"lr": 1e-3, "w": [torch.ones(1)]}, {"lr": 1e-3, "w": [torch.ones(1)]}) == 0.0
