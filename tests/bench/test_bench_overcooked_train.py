"""bench/bench_overcooked_train.py: the paper-budget Overcooked runs go in sittings, each resuming the
run's newest checkpoint, and the table sums the sittings."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from child_env import own_ray_env

from bench.bench_overcooked_train import PAPER, return_at, sitting, sittings_of
from bench.harness.results import read_json
from bench.harness.stamp import ROOT

SMALL = ["workers.num_envs=2", "hmasd.num_epochs=1", "hmasd.hidden=16"]  # 1,600 env steps a round
TINY = ["--layouts", "cramped_room", "--methods", "mappo", "--seeds", "0", *[a for o in SMALL for a in ("--set", o)]]


def _run(*args: str) -> str:
    """A command in its own process (the suite makes itself the subreaper of what it starts), with
    an embedded Ray of its own (not the tests' shared one)."""
    return subprocess.run([sys.executable, "-m", *args], check=True, capture_output=True, text=True, cwd=ROOT,
                          env=own_ray_env()).stdout


@pytest.mark.slow
def test_a_run_goes_on_in_a_second_sitting_and_the_table_sums_both(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    run_dir = work / "cramped_room_mappo_s0"
    # The first sitting as a user starts a run by hand; the suite resumes it and keeps that sitting.
    _run("rl_system", "train", "launch/configs/overcooked_cramped_room_mappo.yaml", "--quiet", "--run-dir",
         str(run_dir), *[a for o in [*SMALL, "max_env_steps=1600"] for a in ("--set", o)])
    text = _run("bench.bench_overcooked_train", *TINY, "--steps", "3200", "--work", str(work), "--out", str(out))
    sits = sittings_of(run_dir)
    assert [s["env_steps_from"] for s in sits] == [0, 1600]  # the second sitting resumed the first's checkpoint
    assert "--resume" in sits[1]["command"] and [s["summary"]["env_steps"] for s in sits] == [1600, 3200]
    assert sits[0]["commit"] == "?"  # not started by the suite: what trained it is not recorded
    row = read_json(out / "cramped_room_mappo_s0.json.xz")
    assert row["env_steps"] == 3200 and row["sittings"] == 2 and row["paper"] == list(PAPER["cramped_room"])
    assert row["train_wall_s"] == pytest.approx(sum(s["summary"]["wall_time_s"] for s in sits))
    assert [r[0] for r in row["curve"]] == [1600, 3200]  # one curve across the sittings (the run's tb)
    assert return_at(row["curve"], 2400) == row["curve"][0][2] and return_at(row["curve"], 800) is None
    assert "| cramped_room | mappo | 0 | 3,200 |" in text
    index = json.loads((out / "overcooked_train.json").read_text())
    assert index["runs"][0]["file"] == "cramped_room_mappo_s0.json.xz"
    # At its budget a run trains nothing more.
    assert sitting("cramped_room", "mappo", 0, 3200, work) == run_dir and len(sittings_of(run_dir)) == 2
