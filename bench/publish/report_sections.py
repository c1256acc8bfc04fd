"""The sections of ``python -m bench.publish.report``, each filling its results dict in place (rows measured
before a failure stay): ``ttt`` and ``throughput`` (CartPole, :mod:`bench.bench_ppo`), ``field``
(Navigation and AirCombat end to end), ``envs`` (the env-only benches), ``codec`` (real rollouts
through the wire format, :mod:`bench.bench_codec`), ``hmasd`` (read from its seeds' stored outputs, not
rerun); the peers' rows (RLlib, the CleanRL-style loop); and the budgets they run under."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import hmasd_output
from bench.harness.learning import QUIET_OVERRIDES, ensure_ray
from bench.harness.stamp import ROOT
from bench.harness.timing import with_threads

SECTIONS = ("ttt", "throughput", "field", "envs", "codec", "hmasd")
RUN_ORDER = ("envs", "codec", "ttt", "throughput", "field", "hmasd")  # env-only first, while the box is quietest

# -- budgets ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Budget:
    seeds: tuple[int, ...]
    peer_seeds: tuple[int, ...]
    ttt_max_wall_s: float | None       # cap per time-to-target run (None: the config's own limits)
    throughput_steps: int              # CartPole throughput run
    field_steps: dict[str, int]        # env -> max_env_steps of the end-to-end run
    field_seeds: int                   # how many of ``seeds`` the field runs use
    peer_budget_s: float               # time-to-target budget per peer run
    peer_throughput_s: float           # RLlib throughput window
    env_repeats: int
    env_seconds: float
    air_warmup: int
    cartpole_sizes: tuple[int, ...]
    air_sizes: tuple[int, ...]
    nav_sizes: tuple[int, ...]
    alice_sizes: tuple[int, ...]
    codec_rounds: int | None           # learner rounds before the "trained" rollout (None: bench_codec's default)


FULL = Budget(seeds=(0, 1, 2, 3, 4), peer_seeds=(0, 1, 2), ttt_max_wall_s=None, throughput_steps=3_000_000,
              field_steps={"Navigation": 1_000_000, "AirCombat": 2_000_000}, field_seeds=1,
              peer_budget_s=120.0, peer_throughput_s=30.0,
              env_repeats=5, env_seconds=0.5, air_warmup=1000,
              cartpole_sizes=(4096, 16384), air_sizes=(4096, 16384), nav_sizes=(512, 1024),
              alice_sizes=(4096,), codec_rounds=None)
QUICK = Budget(seeds=(0,), peer_seeds=(0,), ttt_max_wall_s=45.0, throughput_steps=200_000,
               field_steps={"Navigation": 100_000, "AirCombat": 150_000}, field_seeds=1,
               peer_budget_s=20.0, peer_throughput_s=5.0,
               env_repeats=1, env_seconds=0.1, air_warmup=50,
               cartpole_sizes=(4096,), air_sizes=(4096,), nav_sizes=(512,), alice_sizes=(1024,), codec_rounds=1)

FIELD_CONFIGS = {"Navigation": "launch/configs/navigation_ppo.yaml", "AirCombat": "launch/configs/air_combat_ppo.yaml"}

# -- the sections ----------------------------------------------------------------------------

def log(msg: str) -> None:
    print(f"[bench.publish.report {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _sets(overrides: list[str]) -> str:
    return "".join(f" --set {o}" for o in overrides)


def run_ttt(b: Budget, run_root: Path, sec: dict) -> None:
    from bench.bench_ppo import CONFIG, ours_time_to_target

    ensure_ray()
    extra = [f"max_wall_s={b.ttt_max_wall_s:g}"] if b.ttt_max_wall_s else []
    sec["config"] = CONFIG
    rows = sec["rows"]
    for seed in b.seeds:
        r = ours_time_to_target(seed, run_root, extra)
        r["command"] = f"rl-system train {CONFIG} --set seed={seed}{_sets(extra)}"
        rows.append(r)
        log(f"ttt rl_system seed {seed}: reached {r['reached']} in {r['train_wall_s']:.1f} s, "
             f"{r['env_steps']:,} env steps")


def run_throughput(b: Budget, run_root: Path, sec: dict) -> None:
    from bench.bench_ppo import THROUGHPUT_CONFIG, ours_throughput

    ensure_ray()
    r = ours_throughput(run_root, b.throughput_steps, [])
    bd = r.get("breakdown") or {}
    r["update_share"] = bd["update"] / bd["rounds"] if bd.get("rounds") else None
    r["command"] = f"rl-system train {THROUGHPUT_CONFIG} --set max_env_steps={b.throughput_steps}"
    log(f"throughput rl_system: {r['steps_per_s']:,.0f} env steps/s")
    sec["rows"].append(r)
    sec["config"] = THROUGHPUT_CONFIG


def run_field(b: Budget, run_root: Path, sec: dict) -> None:
    from rl_system.config import load_config
    from rl_system.run.loop import train

    ensure_ray()
    rows = sec["rows"]
    for env, path in FIELD_CONFIGS.items():
        for seed in b.seeds[:b.field_seeds]:
            budget = [f"seed={seed}", f"max_env_steps={b.field_steps[env]}"]
            cfg = load_config(ROOT / path, [*budget, *QUIET_OVERRIDES])
            s = train(cfg, run_dir=run_root / f"{env}-{seed}", quiet=True)
            bd = s.time_breakdown_s
            rows.append({
                "env": env, "seed": seed, "config": path, "env_steps": s.env_steps, "wall_s": s.wall_time_s,
                "startup_s": s.startup_s, "steps_per_s": s.steps_per_s,
                "update_share": bd.update / bd.rounds if bd.rounds else None,
                "final_mean_return": s.final_mean_return,
                "rates": {k: v for k, v in s.final_rates.items() if v is not None},
                "command": f"rl-system train {path}{_sets(budget)}",
            })
            log(f"field {env} seed {seed}: {s.steps_per_s:,.0f} env steps/s over {s.env_steps:,} env steps")


def run_envs(b: Budget, run_root: Path, sec: dict) -> None:
    import torch

    from bench import bench_air_combat, bench_alice_bob, bench_envs, bench_navigation

    rows: list[dict] = sec["rows"]
    rs = f"--repeats {b.env_repeats} --seconds {b.env_seconds:g}"

    def add(env: str, setting: str, n: int, wall: float, cpu: float, command: str,
            wall_median: float | None = None, cpu_median: float | None = None) -> None:
        rows.append({"env": env, "setting": setting, "num_envs": n, "threads": 1, "wall_best": wall,
                     "wall_median": wall_median, "cpu_best": cpu, "cpu_median": cpu_median, "command": command})

    def body() -> None:
        for n in b.cartpole_sizes:
            wall, cpu = bench_envs.bench_torch_cartpole(n, torch.float32, b.env_seconds, b.env_repeats)
            add("CartPole (torch)", "float32", n, wall, cpu, f"python -m bench.bench_envs {rs} --threads 1")
            wall, cpu = bench_envs.bench_gym_numpy(n, b.env_seconds, b.env_repeats, **bench_envs.NUMPY_VECTOR)
            add("CartPole-v1 (Gymnasium numpy vector, peer)", "float64", n, wall, cpu,
                f"python -m bench.bench_envs {rs} --threads 1")
        for load in ("light", "heavy"):
            for n in b.air_sizes:
                r = bench_air_combat.bench(n, load, 1.0, b.env_repeats, b.env_seconds, b.air_warmup)
                add("AirCombat", f"{load}, {r['in_flight']:.1f} missiles in flight", n, r["wall_best"], r["cpu_best"],
                    f"python -m bench.bench_air_combat --sizes {n} --loads {load} --threads 1 "
                    f"--repeats {b.env_repeats} --seconds {b.env_seconds:g} --warmup {b.air_warmup}",
                    r["wall_median"], r["cpu_median"])
        for n in b.nav_sizes:
            wall, cpu, _ = bench_navigation.bench(n, b.env_seconds, b.env_repeats)
            add("Navigation", "random actions", n, wall, cpu,
                f"python -m bench.bench_navigation --sizes {n} {rs} --threads 1")
        for n in b.alice_sizes:
            for policy in ("random", "oracle"):
                wall, cpu, _ = bench_alice_bob.bench(n, policy, "default", "cpu", b.env_seconds, b.env_repeats)
                add("AliceBob", f"default map, {policy} actions", n, wall, cpu,
                    f"python -m bench.bench_alice_bob --sizes {n} --policies {policy} {rs} --threads 1")
        log(f"envs: {len(rows)} rows")

    with_threads(1, body)


def run_codec(b: Budget, run_root: Path, sec: dict) -> None:
    from bench import bench_codec
    from rl_system.envs import registered_names
    from rl_system.rollout.codec import decode, encode

    rows = sec["rows"]
    sec["setting"] = "lz4 level 0, filters='auto' (the codec's default when compressing)"

    def ratio(cols) -> float:
        return bench_codec._nbytes(cols) / max(1, bench_codec._body(encode(cols, {}, level=0, filters="auto")))

    def body() -> None:
        for env, (_, overrides, default_rounds) in bench_codec.ENVS.items():
            if env not in registered_names():
                continue
            k = default_rounds if b.codec_rounds is None else b.codec_rounds
            got = bench_codec.real_rollouts(env, k)
            cols0, _ = decode(got[0][1])
            cols1, _ = decode(got[-1][1]) if k else (None, None)
            shape = dict(o.split("=", 1) for o in overrides)
            n, t = int(shape["workers.num_envs"]), int(shape["workers.rollout_len"])
            big = max(cols0, key=lambda c: cols0[c].numel() * cols0[c].element_size())
            rows.append({
                "env": env, "num_envs": n, "rollout_len": t, "train_rounds": k,
                "raw_bytes_per_step": bench_codec._nbytes(cols0) / (n * t),
                "ratio_untrained": ratio(cols0), "ratio_trained": ratio(cols1) if cols1 is not None else None,
                "largest_column": big,
                "largest_column_ratio": [ratio({big: c[big]}) for c in (cols0, cols1) if c is not None],
                "command": f"python -m bench.bench_codec --env {env}"
                           + (f" --train-rounds {k}" if b.codec_rounds is not None else ""),
            })
            log(f"codec {env}: {rows[-1]['ratio_untrained']:.2f}x untrained, "
                 f"{rows[-1]['ratio_trained'] or float('nan'):.2f}x after {k} rounds")

    with_threads(1, body)


def run_hmasd(b: Budget, run_root: Path, sec: dict) -> None:
    sec.update(hmasd_output.summary(hmasd_output.PRESET_SEEDS))


RUNNERS: dict[str, Callable[[Budget, Path, dict], None]] = {
    "envs": run_envs, "codec": run_codec, "ttt": run_ttt, "throughput": run_throughput, "field": run_field,
    "hmasd": run_hmasd,
}


def run_peers(b: Budget, sections: dict[str, dict], notes: list[str]) -> None:
    """RLlib and CleanRL-style rows for ``ttt`` and ``throughput``; a missing package is a note."""
    want_ttt, want_thr = "ttt" in sections, "throughput" in sections
    if not (want_ttt or want_thr):
        return
    try:
        import ray.rllib  # noqa: F401

        from bench.peers.rllib_ppo import run_rllib_ppo, run_rllib_throughput
        rllib_err = None
    except Exception as err:  # noqa: BLE001 - any import failure means "not usable here"
        rllib_err = f"{type(err).__name__}: {err}".splitlines()[0]
    if rllib_err:
        notes.append(f"RLlib peer skipped: ray.rllib is not importable ({rllib_err}); "
                     f"reinstall with `pip install -e .` (it brings ray[rllib]).")
    else:
        if want_ttt:
            _peer_ttt(b, sections, lambda seed: run_rllib_ppo(seed=seed, time_budget_s=b.peer_budget_s,
                                                              config_name="tuned"),
                      "python -m bench.peers.rllib_ppo --seeds {seed} --config tuned --budget {budget}")
        if want_thr:
            for name in ("throughput", "tuned"):
                sps = run_rllib_throughput(seconds=b.peer_throughput_s, config_name=name)
                sections["throughput"].setdefault("peer_rows", []).append({
                    "peer": f"rllib-ppo[{name}]", "steps_per_s": float(sps),
                    "command": f"python -m bench.peers.rllib_ppo --seeds 0 --config {name} --budget 0 "
                               f"--throughput {b.peer_throughput_s:g}"})
                log(f"throughput rllib [{name}]: {sps:,.0f} env steps/s")
    if want_ttt:
        try:
            from bench.peers.cleanrl_ppo import run_cleanrl_ppo
        except Exception as err:  # noqa: BLE001
            notes.append(f"CleanRL-style peer skipped: {type(err).__name__}: {str(err).splitlines()[0]}.")
            return
        _peer_ttt(b, sections, lambda seed: run_cleanrl_ppo(seed=seed, time_budget_s=b.peer_budget_s, variant="fast"),
                  "python -m bench.peers.cleanrl_ppo --seeds {seed} --variant fast --budget {budget}")


def _peer_ttt(b: Budget, sections: dict[str, dict], run: Callable[[int], dict], command: str) -> None:
    """One peer's time-to-475 row per peer seed, with the command that reproduces it."""
    for seed in b.peer_seeds:
        r = run(seed)
        r["command"] = command.format(seed=seed, budget=f"{b.peer_budget_s:g}")
        sections["ttt"].setdefault("peer_rows", []).append(r)
        log(f"ttt {r['peer']} seed {seed}: reached {r['reached']} in {r['train_wall_s']:.1f} s")
