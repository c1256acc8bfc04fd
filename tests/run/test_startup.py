"""Start-up and shutdown: the embedded Ray sized for what the run asks, a request this machine
cannot meet refused before Ray starts, and every phase of a run timed (``summary.json`` →
``phases_s``, one ``--log-level debug`` line each)."""

from __future__ import annotations

import json
import os

import pytest

from rl_system.actors.placement import PlacementError
from rl_system.cli.main import main
from rl_system.config import load_config
from rl_system.run.phases import PhaseClock, process_age_s
from rl_system.run.startup import check_embedded_placement, embedded_cpus

CARTPOLE = "launch/configs/cartpole_ppo.yaml"


def test_the_embedded_ray_has_a_cpu_for_every_learner_of_a_group():
    one = load_config(CARTPOLE, ["workers.num_workers=4", "learner.num_learners=1"])
    group = load_config(CARTPOLE, ["workers.num_workers=4", "learner.num_learners=3"])
    assert embedded_cpus(one) == max(os.cpu_count(), 5)
    assert embedded_cpus(group) == max(os.cpu_count(), 7)  # 4 workers + 3 learners at 1 CPU each
    assert embedded_cpus(load_config(CARTPOLE, ["workers.num_cpus=0.5", "learner.num_cpus=0.25"])) >= 2
    check_embedded_placement(group)  # fits the cluster the run itself starts: no refusal


def test_a_gpu_or_custom_resource_this_machine_lacks_is_refused_before_ray_starts():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(PlacementError, match=r"needs 2 GPU .* has 0 GPU and does not autoscale"):
        check_embedded_placement(load_config(CARTPOLE, ["workers.num_gpus=1"]))
    with pytest.raises(PlacementError, match=r"needs 2 rollout_node .* has 0 rollout_node"):
        check_embedded_placement(load_config(CARTPOLE, ["workers.resources={rollout_node: 1}"]))


def test_the_phase_clock_adds_up_each_phase_and_says_it():
    said = []
    clock = PhaseClock(say=said.append)
    with clock.phase("probe"):
        pass
    clock.record("train", 2.0)
    clock.record("train", 1.0)
    assert list(clock.seconds) == ["probe", "train"] and clock.seconds["train"] == 3.0
    assert clock.overhead_s() == clock.seconds["probe"]
    assert said[0].startswith("phase probe: ") and said[-1] == "phase train: 1.00s"
    age = process_age_s()
    assert age is None or 0 < age < 24 * 3600  # this process started before this line


def test_a_run_times_its_phases_in_the_summary_and_at_debug_level(ray_session, capsys, tmp_path):
    # One worker: the phases are the run's, whatever its number of workers (one actor start less).
    code = main(["train", CARTPOLE, "--run-dir", str(tmp_path), "--log-level", "debug", "--set", "max_env_steps=4096",
                 "--set", "target_return=null", "--set", "tensorboard=false", "--set", "workers.num_workers=1"])
    out = capsys.readouterr()
    assert code == 0, out.err
    phases = json.loads((tmp_path / "summary.json").read_text())["phases_s"]
    # In-process on a caller's Ray: no Ray to start or stop; every other phase in order.
    assert set(phases) == {"interpreter", "config", "imports", "probe", "actors", "train", "finish", "stop_actors"}
    assert all(s >= 0 for s in phases.values()) and phases["train"] > 0
    for name in ("config", "probe", "actors", "train", "finish"):
        assert f"phase {name}: " in out.err + out.out, name


def test_the_version_flag_names_the_package_and_exits_0(capsys):
    from rl_system import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"rl-system {__version__}"
