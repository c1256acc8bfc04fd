"""Rerun the benchmarks behind README's figures and write the tables README includes.

    python -m bench.report                     # everything (8-15 minutes on 2 cores, ~5 more with --peers)
    python -m bench.report --quick             # tiny budgets, one seed (~2 minutes): checks the pipeline
    python -m bench.report --only ttt,codec    # a subset of the sections
    python -m bench.report --peers             # also RLlib / CleanRL-style PPO where importable
    python -m bench.report --update-readme     # ... and put the tables between README's markers
    python -m bench.report --from-json bench/results/report/report.json --update-readme
                                               # README from the latest run, without rerunning

Sections (``--only``):

* ``ttt``: CartPole wall time and env steps to a 100-episode mean return of 475
  (``launch/configs/cartpole_ppo.yaml``, per seed; ``bench.bench_ppo.ours_time_to_target``);
* ``throughput``: CartPole training throughput, env steps/s with learning on
  (``launch/configs/cartpole_ppo_throughput.yaml``; ``bench.bench_ppo.ours_throughput``);
* ``field``: Navigation and AirCombat end to end, env steps/s with learning on over a short
  budget (``navigation_ppo.yaml``, ``air_combat_ppo.yaml`` through ``rl_system.run.loop.train``);
* ``envs``: env-only throughput (``bench_envs``, ``bench_air_combat``, ``bench_navigation``,
  ``bench_alice_bob``: their ``bench`` functions);
* ``codec``: rollout compression ratios, LZ4 level 0 with the codec's ``filters="auto"``, of a
  real worker's rollouts before and after some learner rounds (``bench.bench_codec.real_rollouts``);
* ``hmasd``: the 20-seed HMASD figures, **not rerun** (hours of compute): read from the
  twenty-seed table of ``docs/hmasd.md`` and cited as such.

``--peers`` adds RLlib PPO (``bench.peers.rllib_ppo``; RLlib is part of the default install) and
the CleanRL-style loop (``bench.peers.cleanrl_ppo``) to ``ttt`` and ``throughput``; a peer whose
package is missing is skipped with a one-line note.

Writes ``bench/results/report/report.md`` (Markdown tables) and ``report.json`` (raw figures),
both stamped with the date (UTC), git commit (``+dirty`` when the tree has changes outside the
report's own output folder), machine (CPU model, cores, memory, GPU), Python / torch / Ray /
gymnasium versions and the 1-minute load average before and after the run. Every table row
carries the command that reproduces it. Ray runs embedded on this machine, as ``rl-system
train`` starts it. README's figures come from the latest full run on a quiet machine
(``--update-readme`` refuses ``--quick`` and ``--only`` results, and runs with a section not measured).

Exit status: 0; 1 when a section could not be measured (its error is in the tables; README is left
alone); 2 for bad flags or README without its marker lines (one line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench.report_md import (  # noqa: F401 - re-exported
    END_MARKER,
    HMASD_DOC,
    START_MARKER,
    ReportError,
    check_readme_markers,
    render_markdown,
    replace_readme_block,
    stamp_line,
)

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "bench" / "results" / "report"
README = ROOT / "README.md"
SECTIONS = ("ttt", "throughput", "field", "envs", "codec", "hmasd")
HMASD_TABLE_TITLE = "The shipped preset: two learner threads, the bound's line search and rollback on collapse"


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
# what every report-driven training run sets besides the budget: no TensorBoard, no per-round
# console lines, no checkpoints (none of them changes what is trained or timed).
QUIET_OVERRIDES = ["tensorboard=false", "log_every_s=1000", "checkpoint.every_rounds=0"]


# -- the stamp ----------------------------------------------------------------------------------

def _load1() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _git(*args: str) -> str | None:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read only: never refresh the index
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit() -> str:
    """Short hash of HEAD, ``+dirty`` when anything tracked or untracked (not ignored) differs,
    the report's own output folder excepted; ``unknown`` outside a git checkout."""
    head = _git("rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown"
    exclude = f":(exclude){OUT_DIR.relative_to(ROOT).as_posix()}"
    status = _git("status", "--porcelain", "--", ".", exclude)
    return head + ("+dirty" if status else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


# The libraries' switches that hold their kernels to one instruction set (docs/user_guide.md,
# "Reproducibility"): a seed's run repeats across CPUs only with the same kernels.
KERNEL_VARS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def cpu_kernels() -> str:
    """The vector instruction set torch's CPU kernels use ("AVX512", "AVX2", ...), with any of
    :data:`KERNEL_VARS` that are set: which kernels made a figure."""
    import torch

    held = " ".join(f"{k}={os.environ[k]}" for k in KERNEL_VARS if k in os.environ)
    return torch.backends.cpu.get_cpu_capability() + (f" ({held})" if held else "")


def where_it_ran() -> dict[str, str]:
    """``commit`` and ``cpu_kernels`` for a training run's row: rows merged from several sittings
    keep their own."""
    return {"commit": git_commit(), "cpu_kernels": cpu_kernels()}


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _version(module: str) -> str | None:
    try:
        return getattr(importlib.import_module(module), "__version__", "unknown")
    except Exception:  # noqa: BLE001 - a missing or broken package is just "not installed"
        return None


def _gpu() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001
        pass
    return None


def stamp() -> dict[str, Any]:
    """Where and when the figures were measured (the load averages are added around the run)."""
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "cpu": _cpu_model(),
        "cpu_kernels": cpu_kernels(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "gpu": _gpu(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "ray": _version("ray"),
        "gymnasium": _version("gymnasium"),
        "numpy": _version("numpy"),
        "load_1m_before": _load1(),
    }


# -- running the sections ----------------------------------------------------------------------

def _log(msg: str) -> None:
    print(f"[bench.report {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _sets(overrides: list[str]) -> str:
    return "".join(f" --set {o}" for o in overrides)


def _ensure_ray() -> None:
    """Embedded local Ray, sized as ``rl-system train`` sizes it (>= the 3 actors' CPUs)."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=max(os.cpu_count() or 1, 3), include_dashboard=False, log_to_driver=False,
                 configure_logging=False)


def run_ttt(b: Budget, run_root: Path, sec: dict) -> None:
    from bench.bench_ppo import CONFIG, ours_time_to_target

    _ensure_ray()
    extra = [f"max_wall_s={b.ttt_max_wall_s:g}"] if b.ttt_max_wall_s else []
    sec["config"] = CONFIG
    rows = sec["rows"]
    for seed in b.seeds:
        r = ours_time_to_target(seed, run_root, extra)
        r["command"] = f"rl-system train {CONFIG} --set seed={seed}{_sets(extra)}"
        rows.append(r)
        _log(f"ttt rl_system seed {seed}: reached {r['reached']} in {r['train_wall_s']:.1f} s, "
             f"{r['env_steps']:,} env steps")


def run_throughput(b: Budget, run_root: Path, sec: dict) -> None:
    from bench.bench_ppo import THROUGHPUT_CONFIG, ours_throughput

    _ensure_ray()
    r = ours_throughput(run_root, b.throughput_steps, [])
    bd = r.get("breakdown") or {}
    r["update_share"] = bd["update"] / bd["rounds"] if bd.get("rounds") else None
    r["command"] = f"rl-system train {THROUGHPUT_CONFIG} --set max_env_steps={b.throughput_steps}"
    _log(f"throughput rl_system: {r['steps_per_s']:,.0f} env steps/s")
    sec["rows"].append(r)
    sec["config"] = THROUGHPUT_CONFIG


def run_field(b: Budget, run_root: Path, sec: dict) -> None:
    from rl_system.config import load_config
    from rl_system.run.loop import train

    _ensure_ray()
    rows = sec["rows"]
    for env, path in FIELD_CONFIGS.items():
        for seed in b.seeds[:b.field_seeds]:
            budget = [f"seed={seed}", f"max_env_steps={b.field_steps[env]}"]
            cfg = load_config(ROOT / path, [*budget, *QUIET_OVERRIDES])
            s = train(cfg, run_dir=run_root / f"{env}-{seed}", quiet=True)
            bd = s.get("time_breakdown_s") or {}
            rows.append({
                "env": env, "seed": seed, "config": path, "env_steps": s["env_steps"], "wall_s": s["wall_time_s"],
                "startup_s": s["startup_s"], "steps_per_s": s["steps_per_s"],
                "update_share": bd["update"] / bd["rounds"] if bd.get("rounds") else None,
                "final_mean_return": s.get("final_mean_return"),
                "rates": {k[len("final_"):-len("_rate")]: v for k, v in s.items()
                          if k.startswith("final_") and k.endswith("_rate") and v is not None},
                "command": f"rl-system train {path}{_sets(budget)}",
            })
            _log(f"field {env} seed {seed}: {s['steps_per_s']:,.0f} env steps/s over {s['env_steps']:,} env steps")


def _with_threads(n: int, fn: Callable[[], Any]) -> Any:
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn()
    finally:
        torch.set_num_threads(prev)


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
            add("CartPole (torch)", "float32", n, wall, cpu, f"python bench/bench_envs.py {rs} --threads 1")
            wall, cpu = bench_envs.bench_gym_numpy(n, b.env_seconds, b.env_repeats, **bench_envs.NUMPY_VECTOR)
            add("CartPole-v1 (Gymnasium numpy vector, peer)", "float64", n, wall, cpu,
                f"python bench/bench_envs.py {rs} --threads 1")
        for load in ("light", "heavy"):
            for n in b.air_sizes:
                r = bench_air_combat.bench(n, load, 1.0, b.env_repeats, b.env_seconds, b.air_warmup)
                add("AirCombat", f"{load}, {r['in_flight']:.1f} missiles in flight", n, r["wall_best"], r["cpu_best"],
                    f"python bench/bench_air_combat.py --sizes {n} --loads {load} --threads 1 "
                    f"--repeats {b.env_repeats} --seconds {b.env_seconds:g} --warmup {b.air_warmup}",
                    r["wall_median"], r["cpu_median"])
        for n in b.nav_sizes:
            wall, cpu, _ = bench_navigation.bench(n, b.env_seconds, b.env_repeats)
            add("Navigation", "random actions", n, wall, cpu,
                f"python bench/bench_navigation.py --sizes {n} {rs} --threads 1")
        for n in b.alice_sizes:
            for policy in ("random", "oracle"):
                wall, cpu, _ = bench_alice_bob.bench(n, policy, "default", "cpu", b.env_seconds, b.env_repeats)
                add("AliceBob", f"default map, {policy} actions", n, wall, cpu,
                    f"python bench/bench_alice_bob.py --sizes {n} --policies {policy} {rs} --threads 1")
        _log(f"envs: {len(rows)} rows")

    _with_threads(1, body)


def run_codec(b: Budget, run_root: Path, sec: dict) -> None:
    from rl_system.envs import registered_names

    from bench import bench_codec
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
                "command": f"python bench/bench_codec.py --env {env}"
                           + (f" --train-rounds {k}" if b.codec_rounds is not None else ""),
            })
            _log(f"codec {env}: {rows[-1]['ratio_untrained']:.2f}x untrained, "
                 f"{rows[-1]['ratio_trained'] or float('nan'):.2f}x after {k} rounds")

    _with_threads(1, body)


def hmasd_cited(doc: Path | None = None) -> dict:
    """The twenty-seed HMASD table of docs/hmasd.md (the one after the line holding
    :data:`HMASD_TABLE_TITLE`), summarised (not rerun: hours of compute)."""
    doc = doc or ROOT / HMASD_DOC
    source = doc.relative_to(ROOT).as_posix() if doc.is_relative_to(ROOT) else str(doc)
    out: dict[str, Any] = {"cited": True, "source": source, "rows": []}
    try:
        lines = doc.read_text().splitlines()
    except OSError as err:
        out["error"] = f"{source}: {err.strerror}"
        return out
    # The paragraph's bold lead-in, not a mention of the title in the text.
    start = next((i for i, ln in enumerate(lines) if ln.startswith("**" + HMASD_TABLE_TITLE)), None)
    if start is None:
        out["error"] = f"{source}: no '{HMASD_TABLE_TITLE}' table"
        return out
    # The first table after the title: markdown rows ("| a | b |") or bench_hmasd's own ("a | b"),
    # known by the separator row under its header.
    sep = re.compile(r"^\|?\s*:?-{3,}")
    head_at = next((i for i in range(start, len(lines) - 1) if "|" in lines[i] and sep.match(lines[i + 1])), None)
    table = []
    for ln in lines[head_at:] if head_at is not None else []:
        if "|" not in ln:
            break
        table.append([c.strip() for c in ln.strip().strip("|").split("|")])
    if len(table) < 3:
        out["error"] = f"{source}: the '{HMASD_TABLE_TITLE}' table is empty"
        return out
    head = [h.lower() for h in table[0]]
    try:
        i_test = next(i for i, h in enumerate(head) if h.startswith("test success"))
        i_best = max(i for i, h in enumerate(head) if "best.json" in h)  # "at, its test" or "… test success"
    except (StopIteration, ValueError):
        out["error"] = f"{source}: unexpected columns {table[0]}"
        return out
    i_low = next((i for i, h in enumerate(head) if h.startswith("lowest after")), None)
    num = re.compile(r"\d+\.\d+")
    final, best, fell = [], [], 0
    for row in table[2:]:
        f, bst = num.findall(row[i_test]), num.findall(row[i_best])
        if f and bst:
            final.append(float(f[0]))  # sampled (the first of "sampled / argmax")
            best.append(float(bst[-1]))  # "at, its test": the test is the last number
            low = num.findall(row[i_low]) if i_low is not None else []
            fell += bool(low) and float(low[0]) < 0.5
    if not final:
        out["error"] = f"{source}: no seeds parsed"
        return out
    cmd = "python -m bench.bench_hmasd --size default --steps 3000000 --seeds N --methods hmasd"
    out["seeds"] = len(final)
    if i_low is not None:
        out["fell_after_solving"] = fell  # runs whose training success fell below 0.5 after first 0.9
    out["rows"] = [
        {"figure": "final policy, test success (both levels sampled)", "passed": sum(v >= 0.8 for v in final),
         "seeds": len(final), "mean": statistics.fmean(final), "command": cmd},
        {"figure": "`best.json` checkpoint, test success", "passed": sum(v >= 0.8 for v in best),
         "seeds": len(best), "mean": statistics.fmean(best), "command": cmd + "; rl-system eval RUN --pick best"},
    ]
    return out


def run_hmasd(b: Budget, run_root: Path, sec: dict) -> None:
    sec.update(hmasd_cited())


RUNNERS: dict[str, Callable[[Budget, Path, dict], None]] = {
    "envs": run_envs, "codec": run_codec, "ttt": run_ttt, "throughput": run_throughput, "field": run_field,
    "hmasd": run_hmasd,
}
RUN_ORDER = ("envs", "codec", "ttt", "throughput", "field", "hmasd")  # env-only first, while the box is quietest


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
                _log(f"throughput rllib [{name}]: {sps:,.0f} env steps/s")
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
        _log(f"ttt {r['peer']} seed {seed}: reached {r['reached']} in {r['train_wall_s']:.1f} s")


def run_report(b: Budget, only: list[str], peers: bool, mode: str) -> dict:
    st = stamp()
    t_all = time.perf_counter()
    sections: dict[str, dict] = {}
    notes: list[str] = []
    run_root = Path(tempfile.mkdtemp(prefix="rl_system_report_"))
    try:
        for name in RUN_ORDER:
            if name not in only:
                continue
            _log(f"section {name} (load average {_load1()})")
            load0, t0 = _load1(), time.perf_counter()
            for attempt in (1, 2):
                sections[name] = {"rows": []}  # filled in place: rows measured before a failure stay
                try:
                    RUNNERS[name](b, run_root, sections[name])
                    break
                except Exception as err:  # noqa: BLE001 - one broken section must not lose the others
                    msg = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                    sections[name]["error"] = msg
                    _log(f"section {name} failed: {msg}")
                    # A Ray session that lost its processes (killed from outside, e.g. by a `ray stop`
                    # elsewhere on a shared box) takes the next section down with it: start afresh.
                    _shutdown_ray()
                    if attempt == 1 and type(err).__module__.startswith("ray"):
                        notes.append(f"section {name} was rerun after a Ray failure ({msg}).")
                        _log(f"section {name}: retrying once with a fresh Ray session")
                        continue
                    break
            sections[name].update(load_1m_before=load0, load_1m_after=_load1(), elapsed_s=time.perf_counter() - t0)
        _shutdown_ray()
        if peers:
            t0 = time.perf_counter()
            try:
                run_peers(b, sections, notes)
            except Exception as err:  # noqa: BLE001 - the peers' rows so far stay, ours are not lost
                notes.append(f"peers stopped by {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
                _log(f"peers failed: {notes[-1]}")
            _shutdown_ray()
            _log(f"peers took {time.perf_counter() - t0:.0f} s")
    finally:
        _shutdown_ray()
        shutil.rmtree(run_root, ignore_errors=True)
    st["load_1m_after"] = _load1()
    return {"stamp": st, "mode": mode, "sections_run": [s for s in RUN_ORDER if s in only], "peers": peers,
            "budget": dataclasses.asdict(b), "elapsed_s": time.perf_counter() - t_all,
            "sections": sections, "notes": notes}


def _shutdown_ray() -> None:
    if "ray" in sys.modules:
        import ray

        try:
            if ray.is_initialized():
                ray.shutdown()
        except Exception as err:  # noqa: BLE001 - a session whose processes are gone
            _log(f"ray.shutdown: {type(err).__name__}: {err}")


# -- command line ------------------------------------------------------------------------------

def write_outputs(results: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "report.md", out_dir / "report.json"
    title = "# Benchmark report (`python -m bench.report`)\n\n"
    md.write_text(title + render_markdown(results))
    js.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return md, js


def _parse_only(value: str | None) -> list[str]:
    if not value:
        return list(SECTIONS)
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in names if v not in SECTIONS]
    if bad:
        raise ReportError(f"--only: unknown section {', '.join(bad)} (sections: {', '.join(SECTIONS)})")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--quick", action="store_true", help="tiny budgets and one seed (~2 minutes): checks the pipeline")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="seeds of the CartPole time-to-target runs (default 0 1 2 3 4; --quick: 0); "
                         "the field runs use the first")
    ap.add_argument("--only", default=None, metavar="NAME[,NAME]", help=f"sections to run: {', '.join(SECTIONS)}")
    ap.add_argument("--peers", action="store_true", help="also RLlib PPO and the CleanRL-style loop, where importable")
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="output folder (default bench/results/report)")
    ap.add_argument("--update-readme", action="store_true",
                    help=f"replace the lines between {START_MARKER} and {END_MARKER} in README with the tables")
    ap.add_argument("--readme", type=Path, default=README, help="the README --update-readme edits")
    ap.add_argument("--from-json", type=Path, default=None, metavar="REPORT.json",
                    help="render a saved report.json instead of running anything")
    args = ap.parse_args(argv)
    try:
        only = _parse_only(args.only)
        if args.update_readme:
            check_readme_markers(args.readme)  # before a long run, not after
        if args.from_json:
            try:
                results = json.loads(args.from_json.read_text())
            except (OSError, ValueError) as err:
                raise ReportError(f"{args.from_json}: {getattr(err, 'strerror', None) or err}") from None
        else:
            if args.update_readme and (args.quick or args.only):
                raise ReportError("--update-readme: README's figures come from a full run (no --quick, no --only)")
            budget = QUICK if args.quick else FULL
            if args.seeds:
                budget = dataclasses.replace(budget, seeds=tuple(args.seeds))
            mode = "quick" if args.quick else "full" if only == list(SECTIONS) else "partial"
            results = run_report(budget, only, args.peers, mode)
            rerun = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--update-readme"]
            results["command"] = " ".join(["python -m bench.report", *rerun])
            md, js = write_outputs(results, args.out)
            _log(f"wrote {md} and {js} in {results['elapsed_s']:.0f} s")
            failed = [n for n, sec in results["sections"].items() if sec.get("error")]
            if failed:
                print(render_markdown(results), end="")
                _log(f"not measured: {', '.join(failed)} (see the errors above); README left alone")
                return 1
        if args.update_readme:
            if results.get("mode", "full") != "full":
                raise ReportError(f"--update-readme: {args.from_json} is a {results.get('mode')} run, not a full one")
            failed = [n for n, sec in results.get("sections", {}).items() if sec.get("error")]
            if failed:
                raise ReportError(f"--update-readme: {args.from_json} lacks {', '.join(failed)} (not measured)")
            replace_readme_block(args.readme, render_markdown(results))
            _log(f"updated {args.readme}")
        else:
            print(render_markdown(results), end="")
    except ReportError as err:
        print(f"bench.report: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
