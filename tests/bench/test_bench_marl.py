"""The multi-agent side-by-side (``bench/bench_marl.py``): the BenchMARL peer's settings are the
ones BenchMARL documents (fine-tuned on VMAS, its defaults on MPE), rl_system's configs carry the
same settings, the table writer formats a result, and the MPE path (rl_system's IPPO and random
play) runs end to end at a tiny budget without BenchMARL."""

from __future__ import annotations

import json
import lzma
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from bench import bench_marl, marl_table
from bench.peers import benchmarl_mappo as peer
from rl_system.config import load_config

ROOT = Path(__file__).resolve().parents[2]

# fine_tuned/vmas/conf/config.yaml in the BenchMARL repository (experiment section)
DOCUMENTED = {"gamma": 0.9, "lr": 0.00005, "on_policy_collected_frames_per_batch": 60_000,
              "on_policy_n_envs_per_worker": 600, "on_policy_n_minibatch_iters": 45, "on_policy_minibatch_size": 4096,
              "share_policy_params": True, "clip_grad_norm": True, "clip_grad_val": 5, "evaluation_episodes": 200}
# benchmarl/conf/algorithm/mappo.yaml, benchmarl/conf/model/layers/mlp.yaml, benchmarl/conf/task/vmas/*.yaml
ALGORITHM = {"clip_epsilon": 0.2, "lmbda": 0.9, "entropy_coef": 0.0, "critic_coef": 1.0, "share_param_critic": True,
             "loss_critic_type": "l2", "use_tanh_normal": True}
TASKS = {"balance": {"max_steps": 100, "n_agents": 4, "random_package_pos_on_line": True, "package_mass": 5},
         "transport": {"max_steps": 100, "n_agents": 4, "n_packages": 1, "package_width": 0.15,
                       "package_length": 0.15, "package_mass": 50}}
# benchmarl/conf/experiment/base_experiment.yaml (BenchMARL 1.5.2): the defaults the MPE run keeps
MPE_DOCUMENTED = {"gamma": 0.99, "lr": 0.00005, "adam_eps": 0.000001, "on_policy_collected_frames_per_batch": 6_000,
                  "on_policy_n_envs_per_worker": 10, "on_policy_n_minibatch_iters": 45,
                  "on_policy_minibatch_size": 400, "share_policy_params": True, "prefer_continuous_actions": True,
                  "clip_grad_norm": True, "clip_grad_val": 5, "parallel_collection": False}
# benchmarl/conf/task/pettingzoo/simple_spread.yaml, max_cycles 25 instead of its 100
SPREAD = {"task": "simple_spread_v3", "N": 3, "local_ratio": 0.5, "max_cycles": 25}


def test_the_peer_uses_the_documented_fine_tuned_settings():
    assert {k: peer.FINE_TUNED[k] for k in DOCUMENTED} == DOCUMENTED
    assert peer.LOCAL["sampling_device"] == peer.LOCAL["train_device"] == "cpu" and "wandb" not in peer.LOCAL["loggers"]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_our_benchmarl_settings_config_carries_the_same_settings(task):
    cfg = load_config(ROOT / bench_marl.BENCHMARL_CONFIGS[task])
    ft, m, w = peer.FINE_TUNED, cfg.mappo, cfg.workers
    assert cfg.algo == "mappo" and cfg.env.name == f"vmas:{task}"
    assert w.num_workers * w.num_envs * w.rollout_len == ft["on_policy_collected_frames_per_batch"]
    assert w.num_workers * w.num_envs == ft["on_policy_n_envs_per_worker"]
    assert w.rollout_len == TASKS[task]["max_steps"]  # one episode per env per round, as BenchMARL's batch
    assert m.num_epochs == ft["on_policy_n_minibatch_iters"]
    assert m.num_minibatches == math.ceil(ft["on_policy_collected_frames_per_batch"] / ft["on_policy_minibatch_size"])
    assert (m.lr, m.gamma, m.max_grad_norm) == (ft["lr"], ft["gamma"], ft["clip_grad_val"])
    assert (m.gae_lambda, m.clip_coef, m.ent_coef) == (ALGORITHM["lmbda"], ALGORITHM["clip_epsilon"],
                                                       ALGORITHM["entropy_coef"])
    assert m.vf_coef * 0.5 == ALGORITHM["critic_coef"]  # ours halves the squared error, BenchMARL's l2 does not
    assert m.hidden_sizes == [256, 256] and m.activation == "tanh" and m.share_params and m.critic == "central"
    assert m.central_value == "joint"  # one pass per env step, as BenchMARL's centralised shared critic
    assert not m.norm_adv and not m.clip_vloss and not m.anneal_lr
    assert cfg.env.kwargs == {"continuous_actions": True, **TASKS[task]}
    assert cfg.return_window == w.num_workers * w.num_envs  # the round's episodes, as BenchMARL's batch mean


@pytest.mark.parametrize("task", sorted(TASKS))
def test_our_own_vmas_config_changes_only_the_update_and_benchmarl_can_take_it(task):
    ours = load_config(ROOT / bench_marl.CONFIGS[task])
    theirs = load_config(ROOT / bench_marl.BENCHMARL_CONFIGS[task])
    assert ours.env == theirs.env and ours.workers == theirs.workers and ours.return_window == theirs.return_window
    changed = {k for k, v in ours.mappo.model_dump().items() if theirs.mappo.model_dump()[k] != v}
    # transport's returns (~0.03) need value normalisation, which BenchMARL's MAPPO has not (like norm_adv)
    normed = {"value_norm"} if task == "transport" else set()
    assert changed == {"lr", "num_epochs", "num_minibatches", "norm_adv"} | normed
    experiment, algorithm = peer.like_config(task, str(ROOT / bench_marl.CONFIGS[task]))
    assert experiment == {"lr": 3e-4, "gamma": 0.9, "clip_grad_val": 5.0, "on_policy_n_minibatch_iters": 5,
                          "on_policy_minibatch_size": 3_750}  # 16 minibatches of the 60,000-frame batch
    assert algorithm == {"lmbda": 0.9, "clip_epsilon": 0.2, "entropy_coef": 0.0, "critic_coef": 1.0}
    with pytest.raises(ValueError, match="60,000 env steps"):
        peer.like_config(task, str(ROOT / "launch/configs/mpe_simple_spread_mappo.yaml"))


def test_our_own_simple_spread_config_changes_only_the_update_and_benchmarl_can_take_it():
    ours = load_config(ROOT / bench_marl.CONFIGS["simple_spread"])
    theirs = load_config(ROOT / bench_marl.BENCHMARL_CONFIGS["simple_spread"])
    assert ours.env == theirs.env and ours.workers == theirs.workers and ours.return_window == theirs.return_window
    changed = {k for k, v in ours.mappo.model_dump().items() if theirs.mappo.model_dump()[k] != v}
    assert changed == {"lr", "num_epochs", "num_minibatches", "norm_adv", "central_value"}
    experiment, algorithm = peer.like_config("simple_spread", str(ROOT / bench_marl.CONFIGS["simple_spread"]))
    assert experiment == {"lr": 3e-4, "gamma": 0.99, "clip_grad_val": 5.0, "on_policy_n_minibatch_iters": 5,
                          "on_policy_minibatch_size": 375}  # 16 minibatches of the 6,000-frame batch
    assert algorithm == {"lmbda": 0.9, "clip_epsilon": 0.2, "entropy_coef": 0.0, "critic_coef": 1.0}


@pytest.mark.parametrize("task", sorted(TASKS))
def test_installed_benchmarl_yaml_matches(task, tmp_path):
    pytest.importorskip("benchmarl")
    got = peer.settings(task)
    assert {k: got["algorithm"][k] for k in ALGORITHM} == ALGORITHM
    assert got["model"] == {"num_cells": [256, 256], "activation_class": "Tanh"}
    assert got["task"] == TASKS[task]
    cfg = peer.experiment_config(task, 120_000, str(tmp_path))
    assert {k: getattr(cfg, k) for k in DOCUMENTED} == DOCUMENTED
    assert cfg.max_n_frames == 120_000 and cfg.evaluation_interval == 60_000 and cfg.sampling_device == "cpu"
    assert cfg.train_minibatch_size(True) == 4096 and cfg.n_optimizer_steps(True) == 45
    like = peer.experiment_config(task, 120_000, str(tmp_path), peer.like_config(task, bench_marl.CONFIGS[task])[0])
    assert like.train_minibatch_size(True) == 3_750 and like.n_optimizer_steps(True) == 5 and like.lr == 3e-4


def test_the_mpe_peer_keeps_benchmarls_documented_defaults():
    assert {k: peer.MPE_DEFAULTS[k] for k in MPE_DOCUMENTED} == MPE_DOCUMENTED
    assert peer.MPE_TASK == {"simple_spread": {"max_cycles": 25}} and peer.MPE_LOCAL == {"evaluation_episodes": 200}
    assert peer.batch_frames("simple_spread") == 6_000 and peer.batch_frames("balance") == 60_000
    assert peer.eval_interval("simple_spread", 300_000) == 60_000
    assert peer.eval_interval("simple_spread", 12_000) == 12_000  # a shorter budget: one evaluation, at its end
    assert peer.eval_interval("balance", 300_000) == 60_000


def test_our_benchmarl_settings_simple_spread_config_carries_the_same_settings():
    cfg = load_config(ROOT / bench_marl.BENCHMARL_CONFIGS["simple_spread"])
    d, m, w = peer.MPE_DEFAULTS, cfg.mappo, cfg.workers
    assert cfg.algo == "mappo" and cfg.env.name == peer.ENV["simple_spread"]
    assert cfg.env.kwargs == {**{k: SPREAD[k] for k in ("N", "max_cycles", "local_ratio")},
                              "continuous_actions": d["prefer_continuous_actions"], "reward": "agent"}
    assert w.num_workers * w.num_envs * w.rollout_len == d["on_policy_collected_frames_per_batch"]
    assert w.num_workers * w.num_envs == d["on_policy_n_envs_per_worker"]
    assert w.rollout_len % SPREAD["max_cycles"] == 0  # whole episodes per round, as BenchMARL's batch
    assert cfg.return_window == w.num_workers * w.num_envs * w.rollout_len // SPREAD["max_cycles"]
    assert m.num_epochs == d["on_policy_n_minibatch_iters"]
    assert m.num_minibatches == math.ceil(d["on_policy_collected_frames_per_batch"] / d["on_policy_minibatch_size"])
    assert (m.lr, m.gamma, m.max_grad_norm) == (d["lr"], d["gamma"], d["clip_grad_val"])
    assert (m.gae_lambda, m.clip_coef, m.ent_coef) == (ALGORITHM["lmbda"], ALGORITHM["clip_epsilon"],
                                                       ALGORITHM["entropy_coef"])
    assert m.vf_coef * 0.5 == ALGORITHM["critic_coef"]
    assert m.hidden_sizes == [256, 256] and m.activation == "tanh" and m.share_params and m.critic == "central"
    assert not m.norm_adv and not m.clip_vloss and not m.anneal_lr
    ippo = ["mappo.central_value=per_agent", "mappo.critic=local"]
    assert bench_marl.OURS["rl_system_ippo"] == (bench_marl.IPPO_CONFIGS, ippo)
    assert bench_marl.IPPO_CONFIGS["balance"] == bench_marl.CONFIGS["balance"]  # VMAS: the MAPPO config as IPPO


def test_the_mpe_ippo_config_is_the_mappo_one_with_a_local_critic_and_a_third_of_its_lr():
    mappo = load_config(ROOT / bench_marl.CONFIGS["simple_spread"], ["mappo.central_value=per_agent"])
    ippo = load_config(ROOT / bench_marl.IPPO_CONFIGS["simple_spread"])
    assert ippo.mappo.critic == "local" and ippo.mappo.central_value == "per_agent"
    assert ippo.mappo.lr == pytest.approx(mappo.mappo.lr / 3)
    same = {"critic", "lr"}
    assert {k: v for k, v in ippo.mappo.model_dump().items() if k not in same} == \
        {k: v for k, v in mappo.mappo.model_dump().items() if k not in same}
    assert ippo.model_dump(exclude={"mappo"}) == mappo.model_dump(exclude={"mappo"})


def test_installed_benchmarl_runs_simple_spread_on_mpe2(tmp_path):
    pytest.importorskip("benchmarl")
    pytest.importorskip("mpe2")
    got = peer.settings("simple_spread")
    assert got["task"] == SPREAD
    cfg = peer.experiment_config("simple_spread", 120_000, str(tmp_path))
    assert {k: getattr(cfg, k) for k in MPE_DOCUMENTED} == MPE_DOCUMENTED
    assert cfg.evaluation_episodes == 200 and cfg.evaluation_interval == 60_000 and cfg.train_device == "cpu"
    task = peer.benchmarl_task("simple_spread")
    env = task.get_env_fun(1, True, 0, "cpu")()
    assert env.group_map == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert env.observation_spec.get("state", None) is not None  # MPE's state: the agents' observations
    assert tuple(env.full_action_spec["agent", "action"].shape) == (3, 5)  # Box(0, 1, (5,)) per agent
    rollout = env.rollout(30, break_when_any_done=True)
    assert rollout.batch_size[0] == SPREAD["max_cycles"] and bool(rollout["next", "truncated"][-1].all())
    assert not rollout["next", "agent", "terminated"].any()  # the time limit stays a truncation: GAE bootstraps


def test_a_benchmarl_curve_joins_its_clock_and_its_csv(tmp_path):
    scalars = tmp_path / "run" / "exp" / "scalars"
    scalars.mkdir(parents=True)
    (scalars / f"{peer.EVAL_KEY}.csv").write_text("0,-10.5\n1,-3.25\n2,nan\n")
    values = peer.read_scalar(tmp_path, peer.EVAL_KEY)
    assert values[1] == -3.25 and peer.read_scalar(tmp_path, "missing") == {}
    stamps = {0: (60_000, 10.0, 19.0), 1: (120_000, 20.0, 39.0), 2: (180_000, 30.0, 59.0)}
    assert peer.join_curve(stamps, values) == [(60_000, 10.0, -10.5, 19.0), (120_000, 20.0, -3.25, 39.0)]


def _runs() -> list[dict]:
    bm = {"peer": "benchmarl_mappo", "env": "vmas:balance", "seed": 0, "env_steps": 120_000, "final_return": 12.5,
          "final_train_return": 8.0, "train_wall_s": 600.0, "eval_wall_s": 60.0, "process_wall_s": 610.0,
          "process_cpu_s": 1200.0, "load_1m_before": 3.5, "load_1m_after": 4.3,
          "train_curve": [(60_000, 300.0, 2.0), (120_000, 600.0, 8.0)]}
    ours = {"peer": "rl_system", "env": "vmas:balance", "seed": 0, "env_steps": 120_000, "final_return": 20.0,
            "final_train_return": 15.0, "train_wall_s": 400.0, "eval_wall_s": 0.0, "process_wall_s": 440.0,
            "process_cpu_s": 800.0, "train_curve": [(60_000, 200.0, 5.0), (120_000, 400.0, 15.0)],
            "test": {"episodes": 2000, "return_mean": 20.0, "return_std": 0.2}}
    return [ours, bm]


def test_table_rows_time_ours_to_benchmarls_final_training_return():
    bm, ours = marl_table.table_rows(_runs())
    assert bm["system"] == "benchmarl_mappo" and bm["level"] is None
    assert bm["steps_per_s"] == pytest.approx(120_000 / 540)  # its evaluation left out
    assert ours["level"] == 8.0 and ours["time_to_level_s"] == 400.0 and ours["cores_busy"] == pytest.approx(800 / 440)


def test_markdown_formats_a_result():
    meta = {"date_utc": "2026-12-04 01:00 UTC", "commit": "abc1234", "cpu": "Some CPU", "lscpu_model": "Some CPU",
            "cores": 2, "python": "3.11.7", "torch": "2.13.0+cpu", "ray": "2.60.0", "gymnasium": "1.2.2",
            "benchmarl": "1.5.2", "torchrl": "0.11.1", "vmas": "1.5.2", "load_1m_before": 0.5, "load_1m_after": 2.1}
    text = marl_table.markdown(meta, marl_table.table_rows(_runs()), "python -m bench.bench_marl --frames 120000")
    assert "`python -m bench.bench_marl --frames 120000` on Some CPU (2 cores)" in text
    assert "BenchMARL 1.5.2" in text
    lines = [line for line in text.splitlines() if line.startswith("| vmas:balance")]
    assert lines[0].startswith("| vmas:balance | 0 | benchmarl_mappo | 120k | 12.500 (200) | 8.000 | 600 (60 eval) | 222 | "
                               "– |")
    assert lines[0].endswith("| 610 | 1,200 | 1.97 | 3.5 → 4.3 |")
    assert lines[1].startswith("| vmas:balance | 0 | rl_system | 120k | 20.000 ± 0.004 (2,000) | 15.000 | 400 | 300 | "
                               "400 s (to 8.000) |")
    assert lines[1].endswith("| 440 | 800 | 1.82 | – → – |")


def test_a_labelled_row_sorts_after_its_system_and_the_evaluation_keeps_its_episodes():
    ours, bm = _runs()
    labelled = {**ours, "peer": "rl_system_value_norm_passes10", "test": {"episodes": 200, "return_se": 0.01},
                "overrides": ["seed=0", "max_env_steps=120000", "mappo.value_norm=true", "mappo.num_epochs=10",
                              "learner.torch_threads=1"]}
    random = {**ours, "peer": "random", "test": {"episodes": 200, "return_se": 0.002}}
    rows = marl_table.table_rows([random, labelled, ours, bm])
    assert [r["system"] for r in rows] == ["benchmarl_mappo", "rl_system", "rl_system_value_norm_passes10", "random"]
    assert (rows[0]["eval_episodes"], rows[0]["eval_se"]) == (200, None)  # stored before its test was
    assert (rows[2]["eval_episodes"], rows[2]["eval_se"]) == (200, 0.01)
    assert rows[1]["eval_se"] == pytest.approx(0.2 / 2000 ** 0.5)
    # a row stored before its sets were: its overrides less what every run sets
    assert rows[2]["sets"] == ["mappo.value_norm=true", "mappo.num_epochs=10"]
    meta = {"date_utc": "2026-12-06 09:00 UTC", "commit": "abc1234", "cpu": "Some CPU", "cores": 2, "python": "3.11.7",
            "torch": "2.13.0+cpu", "ray": "2.60.0", "gymnasium": "1.2.2"}
    text = marl_table.markdown(meta, rows, "python -m bench.bench_marl")
    assert "rl_system_value_norm_passes10: its system with `--set mappo.value_norm=true --set mappo.num_epochs=10`." in text


def test_overrides_need_a_label(capsys):
    with pytest.raises(SystemExit) as e:
        bench_marl.main(["--tasks", "transport", "--frames", "60000", "--set", "mappo.num_epochs=10"])
    assert e.value.code == 2 and "--set and --label go together" in capsys.readouterr().err


def test_a_tree_counted_short_of_the_runs_own_cpu_is_flagged():
    ours, bm = _runs()
    ours.update(train_cpu_s=320.0, process_cpu_s=14.0)
    row = marl_table.table_rows([bm, ours])[1]
    assert row["cpu_missed"] and not marl_table.table_rows([bm])[0]["cpu_missed"]
    assert marl_table._cpu_cell(row) == "≥ 334* (14 + 320)"
    assert row["cores_busy"] == pytest.approx(334 / 440)


def test_budgets_are_whole_batches_ending_on_an_evaluation():
    assert bench_marl.budget_error(["balance", "simple_spread"], 300_000) is None
    assert bench_marl.budget_error(["simple_spread"], 12_000) is None  # below 60,000: one evaluation, at the end
    assert "multiple of 60,000 for simple_spread" in bench_marl.budget_error(["simple_spread"], 66_000)
    assert "multiple of 6,000 for simple_spread" in bench_marl.budget_error(["simple_spread"], 9_000)
    assert "multiple of 60,000 for balance" in bench_marl.budget_error(["balance"], 30_000)


def test_random_actions_stay_in_the_spec():
    """Random play's actions (the env checker's, :func:`rl_system.envs.checker.random_actions`)."""
    from types import SimpleNamespace

    from rl_system.envs.base import ACTION_MASK, AgentBox, AgentDiscrete, AgentMultiDiscrete
    from rl_system.envs.checker import random_actions as checker_actions

    def random_actions(spec, n, gen, mask=None):
        env = SimpleNamespace(action_spec=spec, num_envs=n, device=torch.device("cpu"))
        return checker_actions(env, {} if mask is None else {ACTION_MASK: mask}, gen)

    gen = torch.Generator().manual_seed(0)
    box = random_actions(AgentBox((5,), (0.0,) * 5, (1.0,) * 5, 3), 64, gen)
    assert box.shape == (64, 3, 5) and 0.0 <= float(box.min()) and float(box.max()) <= 1.0 and box.std() > 0.2
    mask = torch.zeros(64, 3, 4, dtype=torch.bool)
    mask[..., 2] = True
    assert bool((random_actions(AgentDiscrete(4, 3), 64, gen, mask) == 2).all())
    multi = random_actions(AgentMultiDiscrete((2, 3), 3), 64, gen)
    assert multi.shape == (64, 3, 2) and int(multi[..., 1].max()) == 2


TINY = """
from bench import bench_marl as b
import yaml
cfg = yaml.safe_load(open(b.ROOT / b.IPPO_CONFIGS["simple_spread"]))
cfg["workers"].update(num_envs=1, rollout_len=50)
cfg["mappo"].update(hidden_sizes=[16], num_epochs=1, num_minibatches=1)
cfg.update(return_window=4)
cfg["learner"]["torch_threads"] = 1
open("{cfg}", "w").write(yaml.safe_dump(cfg))
b.IPPO_CONFIGS["simple_spread"] = "{cfg}"
b.batch_frames = lambda task: 100        # one round of the tiny config
b.eval_interval = lambda task, frames: frames
b.EPISODES_PER_ENV = {{"simple_spread": 4}}
b.main(["--tasks", "simple_spread", "--systems", "rl_system_ippo", "random", "--frames", "200", "--eval-episodes", "8",
        "--out", "{out}"])
"""


@pytest.mark.slow  # a training run with a Ray of its own, then its evaluation, in processes of their own
def test_the_mpe_path_trains_ippo_and_plays_random_at_a_tiny_budget(tmp_path):
    """rl_system's IPPO on simple_spread (a tiny copy of the shipped config: 2 rounds of 100 env
    steps) and random play through main, in a process of its own (main makes its process the
    subreaper of Ray's), without BenchMARL."""
    pytest.importorskip("mpe2")
    out = tmp_path / "out"
    script = TINY.format(cfg=tmp_path / "tiny.yaml", out=out)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ippo = json.loads(lzma.decompress((out / "rl_system_ippo_simple_spread_s0.json.xz").read_bytes()))
    assert ippo["env_steps"] == 200 and ippo["overrides"][-1] == "mappo.critic=local"
    assert ippo["test"]["episodes"] == 8 and math.isfinite(ippo["final_return"])
    rand = json.loads(lzma.decompress((out / "random_simple_spread_s0.json.xz").read_bytes()))
    assert rand["test"]["episodes"] == 8 and -60 < rand["final_return"] < 0
    table = (out / "marl.md").read_text()
    assert "| pettingzoo:mpe2.simple_spread_v3:parallel_env | 0 | rl_system_ippo | 200 |" in table
    assert "| pettingzoo:mpe2.simple_spread_v3:parallel_env | 0 | random | 0 |" in table


def test_a_table_from_stored_runs_names_the_benchmarl_that_trained_them():
    runs = [{"peer": "random"}, {"peer": "benchmarl_mappo", "versions": {"benchmarl": "1.5.2", "torchrl": "0.11.1",
                                                                         "tensordict": None, "vmas": "1.5.2"}}]
    assert marl_table.peer_versions(runs) == {"benchmarl": "1.5.2", "torchrl": "0.11.1"}
    assert marl_table.peer_versions(runs[:1]) == {}
