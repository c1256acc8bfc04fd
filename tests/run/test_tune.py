"""``rl-system tune``: the SPEC grammar, trials that are whole runs in their own placement
groups, population-based training that really exploits (a trial goes on from another trial's
checkpoint with a perturbed config), and the CLI's Ctrl-C / ``--resume`` / results path on real
Ray Tune."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from child_env import foreground_sigint, own_ray_env

from rl_system.actors.placement import run_bundles
from rl_system.checkpoint import load_checkpoint
from rl_system.cli.main import main
from rl_system.config import ConfigError, load_config
from rl_system.tuning.space import parse_search, parse_spec
from rl_system.tuning.sweep import BEST_FILE, RESULTS_FILE, Sweep

REPO = Path(__file__).resolve().parents[2]
CARTPOLE = str(REPO / "launch/configs/cartpole_ppo.yaml")
# A trial small enough for two or three at once on 2 cores: 1.25 CPUs each.
SMALL = ["workers.num_workers=1", "workers.num_cpus=0.5", "learner.num_cpus=0.5", "workers.rollout_len=16",
         "target_return=null", "log_every_s=0"]


def _tree(*overrides: str) -> dict:
    return load_config(CARTPOLE, [*SMALL, *overrides]).model_dump()


# -- SPEC --------------------------------------------------------------------------------------
def test_every_spec_kind_becomes_its_tune_domain():
    from ray.tune.search.sample import Categorical, Float, Integer

    specs = parse_search(["ppo.lr=loguniform(1e-4, 1e-2)", "ppo.ent_coef=choice(0, 0.01)",
                          "model.hidden_sizes=choice([64, 64], [128, 128])", "workers.num_envs=randint(8, 65)",
                          "ppo.clip_coef=grid(0.1, 0.2)", "ppo.gamma=uniform(0.95, 0.999)"], _tree())
    kinds = {s.key: s for s in specs}
    assert kinds["ppo.lr"].values == (1e-4, 1e-2)  # YAML reads 1e-4 as text: read as a number
    assert isinstance(kinds["ppo.lr"].domain(), Float)
    assert isinstance(kinds["ppo.ent_coef"].domain(), Categorical)
    assert kinds["model.hidden_sizes"].values == ([64, 64], [128, 128])
    assert isinstance(kinds["workers.num_envs"].domain(), Integer)
    assert kinds["ppo.clip_coef"].domain() == {"grid_search": [0.1, 0.2]}
    assert kinds["ppo.ent_coef"].mutation() == [0, 0.01]  # PBT perturbs a choice along its list
    assert not kinds["ppo.clip_coef"].perturbed  # grid(): the members' starting points only


@pytest.mark.parametrize("spec, message", [
    ("ppo.lr=normal(0, 1)", "is not a SPEC; use one of choice"),
    ("ppo.lr", "expected KEY=SPEC"),
    ("ppo.lr=uniform(1e-3)", "uniform takes (lo, hi), got 1 value"),
    ("ppo.lr=loguniform(0, 1)", "loguniform needs 0 < lo"),
    ("ppo.lr=uniform(0.1, 0.01)", "needs lo < hi"),
    ("ppo.lr=uniform(-1, 1)", "value -1: ppo.lr: Input should be greater than 0"),
    ("ppo.lrr=choice(0.1)", "ppo.lrr: unknown key"),
    ("workers.num_envs=randint(1.5, 9)", "randint bounds must be integers"),
    ("model.activation=choice(tanh, sigmoidish)", "value 'sigmoidish'"),
    ("ppo.lr=choice()", "choice() needs at least one value"),
])
def test_a_bad_spec_is_one_config_error_line(spec, message):
    with pytest.raises(ConfigError) as err:
        parse_search([spec], _tree())
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_cli_turns_a_bad_spec_into_one_line_and_exit_2(capsys, tmp_path):
    code = main(["tune", CARTPOLE, "--search", "ppo.lr=normal(0, 1)", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert err.startswith("rl-system: config error: --search ppo.lr: 'normal(0, 1)' is not a SPEC")
    code = main(["tune", CARTPOLE, "--search", "ppo.lr=choice(1e-3)", "--scheduler", "asha",
                 "--grace-steps", "5000000", "--out", str(tmp_path)])
    assert code == 2 and "--grace-steps (5000000) must be below max_env_steps" in capsys.readouterr().err
    assert parse_spec("ppo.lr=grid(1, 2)").kind == "grid"


def test_a_trial_reserves_one_bundle_for_its_loop_and_one_per_worker_and_learner():
    cfg = load_config(CARTPOLE, ["workers.num_workers=3", "workers.num_cpus=0.5", "learner.num_gpus=1",
                                 "learner.num_cpus=2"])
    assert run_bundles(cfg, 0.25) == [{"CPU": 0.25}] + [{"CPU": 0.5}] * 3 + [{"CPU": 2.0, "GPU": 1.0}]
    idle = load_config(CARTPOLE, ["workers.num_cpus=0"])  # actors that request nothing get no bundle
    assert run_bundles(idle, 0.25) == [{"CPU": 0.25}, {"CPU": 1.0}]


def test_asha_rungs_count_env_steps_and_leave_the_budget_to_the_trial():
    from rl_system.tuning.sweep import _scheduler

    asha = _scheduler(Sweep(config=_tree("max_env_steps=160000"), search=["ppo.lr=choice(0.001)"]))
    assert asha._time_attr == "env_steps" and asha._max_t == 320000  # a trial ends itself at its budget
    assert sorted(m for m, _ in asha._brackets[0]._rungs) == [10000, 30000, 90000, 270000]  # budget / 16, then x3


# -- the CLI end to end: PBT, Ctrl-C, --resume, the outputs --------------------------------------------
def _tune(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rl_system", "tune", *args], cwd=REPO,
                            env=own_ray_env(PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=foreground_sigint, **kw)


def _exploits(exp: Path) -> list[list]:
    """PBT's own log of its exploits so far (``pbt_global.txt``, one JSON line each: the clone's
    and the donor's tags, their iterations, the clone's old config and its new one). Neither this
    file nor a trial's ``result.json`` keeps them across everything: Tune rewrites an exploited
    trial's ``result.json``, and a resumed sweep's PBT starts this file afresh."""
    f = exp / "pbt_global.txt"
    rows = []
    for line in (f.read_text().splitlines() if f.exists() else []):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line half written: read it on the next poll
            break
    return rows


@pytest.mark.slow
def test_a_pbt_sweep_survives_ctrl_c_resumes_exploits_and_names_its_best_config(tmp_path):
    # Two members (seed 0 and 1), 4,096 env steps a round, 4 rounds; both wait every 8,000 steps
    # (--pbt-synch), then the worse goes on from the better one's checkpoint with a perturbed lr.
    # Ctrl-C comes once PBT has logged its first exploit (at 8,000 of the 16,000 steps), so the
    # sweep is interrupted mid-run however fast the machine. Each perturbation point restarts
    # both members' actors, the test's main cost.
    sets = [a for s in [*SMALL, "max_env_steps=16000", "workers.num_envs=256", "checkpoint.every_rounds=1"]
            for a in ("--set", s)]
    args = [CARTPOLE, *sets, "--search", "seed=grid(0, 1)", "--search", "ppo.lr=loguniform(3e-4, 1e-2)",
            "--num-samples", "1", "--scheduler", "pbt", "--perturbation-steps", "8000", "--pbt-synch",
            "--seed", "3", "--out", str(tmp_path), "--name", "cp"]
    exp = tmp_path / "cp"
    first = _tune(*args, start_new_session=True)
    deadline = time.monotonic() + 240
    while not _exploits(exp) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.2)
    assert first.poll() is None, first.communicate()[1][-2000:]
    before = _exploits(exp)
    assert before, "no exploit logged within 240 s"
    os.killpg(first.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it to the whole group
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, err[-2000:]
    assert f"continue with rl-system tune --resume {exp}" in err
    # Interrupted mid-run: a trial is left short of the budget. The other may have finished in
    # the seconds between the exploit and the stop (a donor goes on at once; its clone restarts).
    interrupted = pd.read_parquet(exp / RESULTS_FILE)
    short = interrupted[interrupted["status"] == "unfinished"]
    assert len(short) and short["env_steps"].max() < 16000, interrupted[["status", "env_steps"]]

    second = _tune("--resume", str(exp))
    out, err = second.communicate(timeout=420)
    assert second.returncode == 0, err[-3000:]
    assert "resuming the sweep" in out and "top 2 of 2 trials by return" in out
    table = pd.read_parquet(exp / RESULTS_FILE)
    assert len(table) == 2 and set(table["status"]) == {"done"}
    assert {"seed", "ppo.lr", "return", "best_return", "env_steps", "checkpoint"} <= set(table.columns)
    assert list(table["env_steps"]) == [16384, 16384]  # a clone goes on from the donor's steps to the budget
    assert table["return"].is_monotonic_decreasing and math.isfinite(table.iloc[0]["return"])
    # The exploit before the Ctrl-C survived the resume: the clone took the donor's seed (a grid
    # key is copied, never perturbed) with a perturbed lr, so from then on both members carry that
    # seed (without the exploit the grid's 0 and 1 would be back).
    old, new = before[0][-2], before[0][-1]
    assert new["ppo.lr"] != old["ppo.lr"]
    assert set(table["seed"]) == {new["seed"]}, table[["trial_id", "seed", "ppo.lr"]]
    # The reports at the perturbation point carried our checkpoints.
    rlck = sorted(exp.glob("*/checkpoint_*/*.rlck"))
    assert rlck and max(load_checkpoint(str(f))[0]["driver"]["env_steps"] for f in rlck) >= 8000
    best = load_config(exp / BEST_FILE)  # a whole config `rl-system train` takes as it is
    top = table.iloc[0]
    assert best.ppo.lr == pytest.approx(top["ppo.lr"]) and best.seed == top["seed"]
    assert best.max_env_steps == 16000 and best.workers.num_workers == 1  # the sweep's --set kept


# -- synchronous PBT: an exploit during a member's pause-save -----------------------------------
def _step_until(ctrl, done, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        ctrl.step()
    assert done(), [(t.trial_id, t.status) for t in ctrl.get_trials()]


def _running_pair(tmp_path, monkeypatch):
    """Our synch PBT on a real TuneController with two live members ``lo`` and ``hi`` that have
    each reported twice (at clock 0, below its first point, 8,000)."""
    import tempfile

    from ray import tune
    from ray.train._internal.storage import StorageContext
    from ray.tune import Callback
    from ray.tune.execution.tune_controller import TuneController
    from ray.tune.experiment import Trial

    from rl_system.tuning.pbt import PopulationBasedTraining

    def _checkpointing_member(config):
        """A member that reports every 20 ms, each report with a checkpoint, PBT's clock at 0
        (defined here: Ray ships it to the trial's actor by value)."""
        while True:
            staging = Path(tempfile.mkdtemp(prefix="pbt_race_", dir=config["staging"]))  # the test's tmp_path
            (staging / "state").write_text(str(config["lr"]))
            tune.report({"return": 0.0, "clock": 0}, checkpoint=tune.Checkpoint.from_directory(str(staging)))
            time.sleep(0.02)

    class Reports(Callback):
        """Reports per trial, as a Tune callback counts them."""

        def __init__(self):
            self.count: dict[str, int] = {}

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.count[trial.trial_id] = self.count.get(trial.trial_id, 0) + 1

    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "2")
    tune.register_trainable("pbt_race", _checkpointing_member)
    pbt = PopulationBasedTraining(time_attr="clock", metric="return", mode="max", perturbation_interval=8000,
                                  hyperparam_mutations={"lr": [1e-3, 1e-2]}, quantile_fraction=0.25, synch=True)
    storage = StorageContext(storage_path=str(tmp_path), experiment_dir_name="race")
    reports = Reports()
    ctrl = TuneController(scheduler=pbt, storage=storage, callbacks=[reports])
    staging = tmp_path / "staging"
    staging.mkdir()
    lo, hi = (Trial("pbt_race", config={"lr": 1e-3, "staging": str(staging)}, storage=storage,
                    placement_group_factory=tune.PlacementGroupFactory([{"CPU": 0.1}])) for _ in range(2))
    try:
        for member in (lo, hi):
            ctrl.add_trial(member)
        _step_until(ctrl, lambda: all(reports.count.get(t.trial_id, 0) >= 2 for t in (lo, hi)))
    except BaseException:
        ctrl.cleanup()
        raise
    return ctrl, pbt, lo, hi, reports


@pytest.mark.slow
def test_synch_pbt_keeps_a_member_exploited_while_its_pause_save_is_in_flight(ray_session, tmp_path, monkeypatch):
    # The sequence that hung a resumed sweep: member `lo` reaches the synch point and Tune pauses
    # it, saving it first; `hi`'s report at the same point arrives before that save resolves, so
    # PBT exploits `lo` mid-save. Stock Tune 2.60 leaves a STOP cached for `lo`, and the first
    # checkpointed report after its restart terminates it below the next synch point.
    from ray.tune.experiment import Trial

    ctrl, pbt, lo, hi, reports = _running_pair(tmp_path, monkeypatch)
    try:
        assert pbt.on_trial_result(ctrl, lo, {"return": 0.0, "clock": 8192}) == "PAUSE"  # hi is not there yet
        ctrl.pause_trial(lo)  # what Tune does with PAUSE: save the member, then stop it
        assert lo.is_saving
        assert pbt.on_trial_result(ctrl, hi, {"return": 1.0, "clock": 8192}) == "PAUSE"  # both there: exploit lo
        ctrl.pause_trial(hi)
        assert lo.status == Trial.PAUSED and lo.config["lr"] in (1e-3, 1e-2)
        assert lo.trial_id not in ctrl._cached_trial_decisions  # no STOP left for lo's next save

        # Both go on; lo from hi's checkpoint. It must live past its first checkpointed reports.
        before = reports.count[lo.trial_id]
        _step_until(ctrl, lambda: reports.count[lo.trial_id] >= before + 3 or lo.status == Trial.TERMINATED)
        assert lo.status == Trial.RUNNING, lo.status
    finally:
        ctrl.cleanup()


@pytest.mark.slow
def test_synch_pbt_members_that_meet_past_two_points_go_on(ray_session, tmp_path, monkeypatch):
    # A resumed sweep's fresh scheduler counts from 0 while its members restart at 20,480 env steps
    # (so does a round longer than the interval). Stock Tune 2.60 then puts the next point at the
    # members' own time, max(8,000 + 8,000, 20,480), runs only members below it, and waits forever.
    ctrl, pbt, lo, hi, _ = _running_pair(tmp_path, monkeypatch)
    try:
        assert pbt.on_trial_result(ctrl, lo, {"return": 0.0, "clock": 20480}) == "PAUSE"
        ctrl.pause_trial(lo)
        assert pbt.on_trial_result(ctrl, hi, {"return": 1.0, "clock": 20480}) == "PAUSE"  # both there: exploit lo
        ctrl.pause_trial(hi)
        assert pbt._next_perturbation_sync == 24000  # the first multiple of the interval above both
        assert pbt.choose_trial_to_run(ctrl) in (lo, hi)  # stock Tune: None, for ever
    finally:
        ctrl.cleanup()


# -- a plug-in algorithm through the sweep ----------------------------------------------------------
@pytest.mark.slow
def test_an_a2c_sweep_searches_its_own_section_and_names_its_best_config(tmp_path):
    """Tune knows no algorithm by name: A2C's ``a2c.lr`` is searched as PPO's ``ppo.lr`` is, its
    trials are A2C runs, and the best config is an A2C config `rl-system train` takes."""
    out = subprocess.run([sys.executable, "-m", "rl_system", "tune", str(REPO / "launch/configs/cartpole_a2c.yaml"),
                          "--search", "a2c.lr=grid(0.0007, 0.002)", "--num-samples", "1", "--scheduler", "fifo",
                          "--set", "max_env_steps=2000", "--set", "workers.num_cpus=0.5", "--set",
                          "learner.num_cpus=0.5", "--out", str(tmp_path)], cwd=REPO, env=own_ray_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    exp = next(tmp_path.glob("tune-CartPole-*"))
    table = pd.read_parquet(exp / RESULTS_FILE)
    assert sorted(table["a2c.lr"]) == [0.0007, 0.002] and set(table["status"]) == {"done"}
    assert list(table["env_steps"]) == [2000, 2000]
    state = load_checkpoint(str(sorted(exp.glob(f"{table.iloc[0]['trial_id']}/checkpoint_*/*.rlck"))[-1]))[0]
    assert state["config"]["algo"] == "a2c" and state["config"]["a2c"]["lr"] == table.iloc[0]["a2c.lr"]
    best = load_config(exp / BEST_FILE)
    assert best.algo == "a2c" and best.a2c.lr == pytest.approx(table.iloc[0]["a2c.lr"])
