"""The VMAS side-by-side (``bench/bench_marl.py``): the BenchMARL peer's settings are the fine-tuned
ones BenchMARL documents, rl_system's configs carry the same settings, and the table writer
formats a result. No training here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import bench_marl
from bench.peers import benchmarl_mappo as peer
from rl_system.config import load_config

ROOT = Path(__file__).resolve().parents[1]

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


def test_the_peer_uses_the_documented_fine_tuned_settings():
    assert {k: peer.FINE_TUNED[k] for k in DOCUMENTED} == DOCUMENTED
    assert peer.LOCAL["sampling_device"] == peer.LOCAL["train_device"] == "cpu" and "wandb" not in peer.LOCAL["loggers"]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_our_config_carries_the_same_settings(task):
    cfg = load_config(ROOT / bench_marl.CONFIGS[task])
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
    assert not m.norm_adv and not m.clip_vloss and not m.anneal_lr
    assert cfg.env.kwargs == {"continuous_actions": True, **TASKS[task]}
    assert cfg.return_window == w.num_workers * w.num_envs  # the round's episodes, as BenchMARL's batch mean


@pytest.mark.parametrize("task", sorted(TASKS))
def test_installed_benchmarl_yaml_matches(task, tmp_path):
    pytest.importorskip("benchmarl")
    got = peer.settings(task)
    assert {k: got["algorithm"][k] for k in ALGORITHM} == ALGORITHM
    assert got["model"] == {"num_cells": [256, 256], "activation_class": "Tanh"}
    assert got["task"] == TASKS[task]
    cfg = peer.experiment_config(120_000, str(tmp_path))
    assert {k: getattr(cfg, k) for k in DOCUMENTED} == DOCUMENTED
    assert cfg.max_n_frames == 120_000 and cfg.evaluation_interval == 60_000 and cfg.sampling_device == "cpu"
    assert cfg.train_minibatch_size(True) == 4096 and cfg.n_optimizer_steps(True) == 45


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
            "process_cpu_s": 800.0, "train_curve": [(60_000, 200.0, 5.0), (120_000, 400.0, 15.0)]}
    return [ours, bm]


def test_table_rows_time_ours_to_benchmarls_final_training_return():
    bm, ours = bench_marl.table_rows(_runs())
    assert bm["system"] == "benchmarl_mappo" and bm["level"] is None
    assert bm["steps_per_s"] == pytest.approx(120_000 / 540)  # its evaluation left out
    assert ours["level"] == 8.0 and ours["time_to_level_s"] == 400.0 and ours["cores_busy"] == pytest.approx(800 / 440)


def test_markdown_formats_a_result():
    meta = {"date_utc": "2026-12-04 01:00 UTC", "commit": "abc1234", "cpu": "Some CPU", "lscpu_model": "Some CPU",
            "cores": 2, "python": "3.11.7", "torch": "2.13.0+cpu", "ray": "2.60.0", "gymnasium": "1.2.2",
            "benchmarl": "1.5.2", "torchrl": "0.11.1", "vmas": "1.5.2", "load_1m_before": 0.5, "load_1m_after": 2.1}
    text = bench_marl.markdown(meta, bench_marl.table_rows(_runs()), "python -m bench.bench_marl --frames 120000")
    assert "`python -m bench.bench_marl --frames 120000` on Some CPU (2 cores)" in text
    assert "BenchMARL 1.5.2" in text
    lines = [line for line in text.splitlines() if line.startswith("| vmas:balance")]
    assert lines[0].startswith("| vmas:balance | 0 | benchmarl_mappo | 120k | 12.500 | 8.000 | 600 (60 eval) | 222 | "
                               "– |")
    assert lines[0].endswith("| 610 | 1,200 | 1.97 | 3.5 → 4.3 |")
    assert lines[1].startswith("| vmas:balance | 0 | rl_system | 120k | 20.000 | 15.000 | 400 | 300 | "
                               "400 s (to 8.000) |")
    assert lines[1].endswith("| 440 | 800 | 1.82 | – → – |")


def test_a_tree_counted_short_of_the_runs_own_cpu_is_flagged():
    ours, bm = _runs()
    ours.update(train_cpu_s=320.0, process_cpu_s=14.0)
    row = bench_marl.table_rows([bm, ours])[1]
    assert row["cpu_missed"] and not bench_marl.table_rows([bm])[0]["cpu_missed"]
    assert bench_marl._cpu_cell(row) == "≥ 334* (14 + 320)"
    assert row["cores_busy"] == pytest.approx(334 / 440)
