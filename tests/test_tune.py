"""``rl-system tune``: the SPEC grammar, trials that are whole runs in their own placement
groups, population-based training that really exploits (a trial goes on from another trial's
checkpoint with a perturbed config), and the CLI's Ctrl-C / ``--resume`` / results path on real
Ray Tune."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from rl_system.checkpoint import load_checkpoint
from rl_system.cli import main
from rl_system.config import ConfigError, load_config
from rl_system.placement import run_bundles
from rl_system.tuning.space import parse_search, parse_spec
from rl_system.tuning.sweep import BEST_FILE, RESULTS_FILE, Sweep

REPO = Path(__file__).resolve().parents[1]
CARTPOLE = str(REPO / "launch/configs/cartpole_ppo.yaml")
# A trial small enough for two or three at once on 2 cores: 1.25 CPUs each.
SMALL = ["workers.num_workers=1", "workers.num_cpus=0.5", "learner.num_cpus=0.5", "target_return=null",
         "log_every_s=0"]


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


# -- population-based training, in this process ---------------------------------------------------
def test_pbt_trials_go_on_from_another_trials_checkpoint_with_a_perturbed_config(ray_session, tmp_path):
    from rl_system.tuning.results import write_outputs
    from rl_system.tuning.sweep import tuner

    # 4,096 env steps a round: both trials wait at round 2 of 4, then the worse one clones the better.
    sweep = Sweep(config=_tree("max_env_steps=16000", "workers.num_envs=256"), search=["ppo.lr=loguniform(3e-4, 1e-2)"],
                  scheduler="pbt", num_samples=2, perturbation_steps=8000, pbt_synch=True, seed=3)
    sweep.check()
    grid = tuner(sweep, tmp_path / "pbt").fit()
    assert grid.num_errors == 0 and grid.num_terminated == 2
    logs = {r.metrics["trial_id"]: (Path(r.path) / f"rl_system_{r.metrics['trial_id']}" / "console.log").read_text()
            for r in grid}
    exploited = [t for t, log in logs.items() if "resumed at round" in log]
    assert exploited, "no trial was exploited"
    for result in grid:
        assert result.metrics["env_steps"] == 16384  # a clone goes on from the donor's steps to the budget
    # An exploited trial goes on with a perturbed lr: its history has more than one.
    lrs = {r.metrics["trial_id"]: r.metrics_dataframe["config/ppo.lr"] for r in grid}
    assert any(lrs[t].nunique() > 1 for t in exploited)
    final = {t: lr.iloc[-1] for t, lr in lrs.items()}
    # Each PBT report that crossed a perturbation point carried one of our checkpoints.
    ckpt = next(r.checkpoint for r in grid if r.checkpoint is not None)
    rlck = list(Path(ckpt.path).glob("*.rlck"))
    assert len(rlck) == 1 and load_checkpoint(str(rlck[0]))[0]["driver"]["env_steps"] >= 8000
    table, best = write_outputs(grid, sweep, tmp_path / "pbt")
    assert len(table) == 2 and set(table["status"]) == {"done"}
    assert load_config(best).ppo.lr == pytest.approx(final[table.iloc[0]["trial_id"]])


# -- the CLI: ASHA, Ctrl-C, --resume, the outputs ----------------------------------------------------
def _tune(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, "-m", "rl_system", "tune", *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_an_asha_sweep_survives_ctrl_c_resumes_and_names_its_best_config(tmp_path):
    # 4,096 env steps a round, 3 rounds a trial, ASHA's first rung after the first round.
    sets = [a for s in [*SMALL, "max_env_steps=12000", "workers.num_envs=256", "checkpoint.every_rounds=1"]
            for a in ("--set", s)]
    # Two trials, one at a time (each trial's start costs seconds of imports on a small machine).
    args = [CARTPOLE, *sets, "--search", "ppo.lr=grid(0.0001, 0.005)", "--search", "ppo.ent_coef=choice(0.0, 0.01)",
            "--num-samples", "1", "--scheduler", "asha", "--grace-steps", "4000", "--max-concurrent", "1",
            "--seed", "0", "--out", str(tmp_path), "--name", "cp"]
    exp = tmp_path / "cp"
    first = _tune(*args, start_new_session=True)
    deadline = time.monotonic() + 240
    while not list(exp.glob("*/checkpoint_*/*.rlck")) and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.5)
    assert first.poll() is None, first.communicate()[1][-2000:]
    os.killpg(first.pid, signal.SIGINT)  # Ctrl-C, as a terminal sends it to the whole group
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, err[-2000:]
    assert f"continue with rl-system tune --resume {exp}" in err

    second = _tune("--resume", str(exp))
    out, err = second.communicate(timeout=420)
    assert second.returncode == 0, err[-3000:]
    assert "resuming the sweep" in out and "top 2 of 2 trials by return" in out
    table = pd.read_parquet(exp / RESULTS_FILE)
    assert len(table) == 2 and set(table["status"]) == {"done"}
    assert sorted(table["ppo.lr"]) == [0.0001, 0.005]
    assert {"ppo.lr", "ppo.ent_coef", "return", "best_return", "env_steps", "checkpoint"} <= set(table.columns)
    assert table["return"].is_monotonic_decreasing
    assert any("resumed at round" in p.read_text() for p in exp.glob("*/rl_system_*/console.log"))
    best = exp / BEST_FILE
    cfg = load_config(best)
    top = table.iloc[0]
    assert cfg.ppo.lr == pytest.approx(top["ppo.lr"]) and cfg.ppo.ent_coef == pytest.approx(top["ppo.ent_coef"])
    assert cfg.max_env_steps == 12000 and cfg.workers.num_workers == 1  # the sweep's --set kept
    assert math.isfinite(top["return"])
