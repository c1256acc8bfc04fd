"""bench/bench_mujoco.py's bookkeeping: the common return, time to it, the curve read back from
a run's TensorBoard files, runs stored compressed and read back (the training runs themselves are
benchmarks, not tests)."""

from __future__ import annotations

from bench.bench_mujoco import markdown, summarise
from bench.harness.learning import first_at, tb_curve


def _run(peer, seed, final, curve, **extra):
    return {"peer": peer, "env": "Hopper-v5", "seed": seed, "env_steps": 1000, "train_wall_s": 10.0,
            "final_return": final, "curve": curve, **extra}


def test_common_return_is_the_lower_mean_final_and_times_are_to_it():
    runs = [
        _run("rl_system", 0, 2000.0, [(100, 1.0, 500.0), (200, 2.0, 1600.0), (1000, 10.0, 2000.0)]),
        _run("rl_system", 1, 1800.0, [(100, 1.0, 900.0), (300, 3.0, 1700.0)]),
        _run("sb3_zoo", 0, 1700.0, [(100, 5.0, 300.0, 4.0), (900, 40.0, 1700.0, 38.0)], train_cpu_s=45.0),
    ]
    rows = {r["peer"]: r for r in summarise(runs)}
    assert rows["rl_system"]["common_return"] == rows["sb3_zoo"]["common_return"] == 1700.0
    assert rows["rl_system"]["reached"] == "2/2" and rows["rl_system"]["time_to_common_s"] == 6.5  # median of 10 and 3
    assert rows["sb3_zoo"]["time_to_common_s"] == 40.0 and rows["sb3_zoo"]["cpu_s"] == 45.0
    assert rows["sb3_zoo"]["cpu_to_common_s"] == 38.0 and rows["rl_system"]["cpu_to_common_s"] is None
    assert first_at([(1, 1.0, 5.0)], 6.0) is None
    text = markdown({"date": "d", "commit": "c", "cpu": "2 x cpu", "python": "3", "torch": "t", "ray": "r",
                     "gymnasium": "g", "mujoco": "m", "sb3": "s"}, list(rows.values()), [], "python -m bench.bench_mujoco")
    assert "| Hopper-v5 | sb3_zoo | 0 | 1700 (1700) | 10 (45) |" in text


def test_a_timing_rerun_replaces_its_seeds_time_to_the_common_return_but_not_its_final_return():
    runs = [
        _run("rl_system", 0, 2000.0, [(100, 1.0, 500.0), (200, 2.0, 1600.0), (1000, 10.0, 2000.0)]),
        _run("rl_system", 1, 1800.0, [(100, 50.0, 900.0), (300, 90.0, 1700.0)]),  # slowed by other jobs
        _run("sb3_zoo", 0, 1700.0, [(100, 5.0, 300.0, 4.0), (900, 40.0, 1700.0, 38.0)], train_cpu_s=45.0),
    ]
    rerun = _run("rl_system", 1, 1750.0, [(100, 1.0, 800.0), (400, 4.0, 1750.0)])  # part of the budget, alone
    rows = {r["peer"]: r for r in summarise(runs, [rerun])}
    mine = rows["rl_system"]
    assert mine["final_returns"] == [2000.0, 1800.0] and mine["times_to_common_s"] == [10.0, 4.0]
    assert mine["time_to_common_s"] == 7.0 and mine["times_from_reruns"] == [1]
    assert rows["sb3_zoo"]["times_from_reruns"] == []
    text = markdown({"date": "d", "commit": "c", "cpu": "2 x cpu", "python": "3", "torch": "t", "ray": "r",
                     "gymnasium": "g", "mujoco": "m", "sb3": "s"}, list(rows.values()), [], "python -m bench.bench_mujoco")
    assert "| 7 s [10, 4] (seeds 1: reruns) |" in text


def test_the_curve_of_a_run_is_read_back_from_its_tensorboard_files(tmp_path):
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tmp_path)) as w:
        for step, ret in ((512, 10.0), (1024, 20.0)):
            w.add_scalar("rollout/return_mean", ret, step)
            w.add_scalar("system/steps_per_s", 256.0, step)
    assert tb_curve(tmp_path) == [(512, 2.0, 10.0), (1024, 4.0, 20.0)]


def test_times_to_several_returns_give_the_ratio_only_where_every_seed_of_both_peers_got_there():
    from bench.bench_mujoco import level_markdown, level_rows

    runs = [
        _run("rl_system", 0, 2000.0, [(100, 1.0, 500.0), (200, 2.0, 1600.0), (1000, 10.0, 2000.0)]),
        _run("rl_system", 1, 1800.0, [(100, 1.0, 900.0), (300, 3.0, 1700.0)]),
        _run("sb3_zoo", 0, 1700.0, [(100, 5.0, 300.0, 4.0), (900, 40.0, 1700.0, 38.0)]),
        _run("sb3_zoo", 1, 200.0, [(100, 5.0, 600.0, 6.0), (900, 40.0, 200.0, 38.0)]),  # rose, then collapsed
    ]
    rows = {r["return"]: r for r in level_rows(runs, [], [500.0, 1700.0])}
    assert rows[500.0]["peers"]["rl_system"]["median_s"] == 1.0
    assert rows[500.0]["peers"]["sb3_zoo"] == {"reached": "2/2", "all": True, "median_s": 22.0, "clock": "CPU"}
    assert rows[500.0]["ratio"] == 22.0  # SB3's CPU seconds (median of 38 and 6) over our wall seconds
    assert rows[1700.0]["peers"]["sb3_zoo"]["reached"] == "1/2" and rows[1700.0]["ratio"] is None
    text = "\n".join(level_markdown(list(rows.values())))
    assert "| Hopper-v5 | 500 | 2/2, 1 wall s | 2/2, 22 CPU s | 22.0× |" in text
    assert "| Hopper-v5 | 1700 | 2/2, 6 wall s | 1/2, 38 CPU s | — |" in text


def test_both_rl_system_backends_get_a_ratio_each_against_sb3():
    from bench.bench_mujoco import level_markdown, level_rows

    runs = [
        _run("rl_system", 0, 2000.0, [(100, 4.0, 500.0)]),
        _run("rl_system_envpool", 0, 2000.0, [(100, 2.0, 500.0)]),
        _run("sb3_zoo", 0, 1700.0, [(100, 5.0, 600.0, 8.0)]),
    ]
    [row] = level_rows(runs, [], [500.0])
    assert row["ratios"] == {"rl_system": 2.0, "rl_system_envpool": 4.0} and row["ratio"] == 2.0
    text = "\n".join(level_markdown([row]))
    assert "| ratio, rl_system | ratio, rl_system_envpool |" in text
    assert "| Hopper-v5 | 500 | 1/1, 4 wall s | 1/1, 2 wall s | 1/1, 8 CPU s | 2.0× | 4.0× |" in text
    cheetah = [dict(r, env="HalfCheetah-v5") for r in runs if r["peer"] != "rl_system_envpool"]
    rows = level_rows([*cheetah, *runs], [], [500.0])  # HalfCheetah first, without the EnvPool backend
    text = "\n".join(level_markdown(rows))
    assert "| HalfCheetah-v5 | 500 | 1/1, 4 wall s | — | 1/1, 8 CPU s | 2.0× | — |" in text
    assert "| Hopper-v5 | 500 | 1/1, 4 wall s | 1/1, 2 wall s | 1/1, 8 CPU s | 2.0× | 4.0× |" in text


def test_a_run_dir_names_its_backend_by_the_env_prefix(tmp_path):
    import json

    import yaml

    from bench.harness.learning import read_ours

    for prefix, peer in (("gym:", "rl_system"), ("envpool:", "rl_system_envpool")):
        run = tmp_path / peer
        (run / "tb").mkdir(parents=True)
        (run / "config.yaml").write_text(yaml.safe_dump({"env": {"name": f"{prefix}Hopper-v5"}, "seed": 1}))
        (run / "summary.json").write_text(json.dumps({"env_steps": 10, "wall_time_s": 1.0, "final_mean_return": 5.0}))
        got = read_ours(run)
        assert (got["peer"], got["env"], got["seed"]) == (peer, "Hopper-v5", 1)


def test_a_run_stored_compressed_reads_back_and_the_aggregate_points_at_it(tmp_path):
    from bench.harness.learning import read_run
    from bench.harness.results import run_index, write_run

    row = _run("rl_system", 0, 3000.0, [(512, 2.0, 10.0), (1024, 4.0, 20.0)])
    path = write_run(tmp_path / "rl_system_Hopper-v5_s0.json", row)
    assert path.name == "rl_system_Hopper-v5_s0.json.xz"
    got = read_run(path)
    assert {k: v for k, v in got.items() if k != "source"} == {**row, "curve": [[512, 2.0, 10.0], [1024, 4.0, 20.0]]}
    (entry,) = run_index([got], tmp_path)
    assert entry["file"] == "rl_system_Hopper-v5_s0.json.xz" and "curve" not in entry
    assert (entry["peer"], entry["seed"], entry["final_return"]) == ("rl_system", 0, 3000.0)
    assert summarise([got]) == summarise([row])  # tuples stored as lists read the same


def test_a_tagged_variant_is_its_own_peer_and_set_without_a_tag_is_refused(tmp_path):
    import subprocess
    import sys

    from bench.bench_mujoco import run_file

    variant = _run("rl_system_lag1", 0, 900.0, [(100, 1.0, 900.0)], overrides=["max_policy_lag=1"])
    rows = {r["peer"]: r for r in summarise([_run("rl_system", 0, 1000.0, [(100, 2.0, 1000.0)]), variant])}
    assert set(rows) == {"rl_system", "rl_system_lag1"} and rows["rl_system_lag1"]["time_to_common_s"] == 1.0
    assert run_file(tmp_path, variant).name == "rl_system_lag1_Hopper-v5_s0"
    out = subprocess.run([sys.executable, "-m", "bench.bench_mujoco", "--set", "max_policy_lag=1", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2 and "--set needs --tag" in out.stderr.strip().splitlines()[-1], out.stderr
