"""GPU check: the CUDA tests and the GPU figures in one unattended run of a few minutes.

    python -m bench.gpu_check [--out bench/results/gpu_check] [--quick] [--device cuda] [--parts ...]

1. the tests that need CUDA (``pytest -m cuda``; they skip on CPU machines);
2. env-only steps/s (``env.step`` with pre-generated random actions, synchronised) of CartPole,
   Navigation and AirCombat at 4k, 16k and 64k envs on one GPU;
3. end-to-end PPO training steps/s with GPU workers and a GPU learner on each of those envs;
4. wall time to a CartPole mean return of 475 (``cartpole_ppo.yaml``, GPU worker and learner);
5. learner samples/s (env steps trained on per second) for 1 and 2 learners on one round.
   Two learners on one GPU use gloo (NCCL wants a GPU per rank; ``backend: auto`` picks gloo for shares);
6. the model paths beyond the MLP (HMASD on AliceBob, the lidar CNN, recurrent PPO), each trained
   for ``--models-s`` with GPU workers and learner and, as the baseline in the same run, on CPU;
7. one update of each shipped network on the device: fp32, bf16 autocast, and the compiled PPO
   loss (``learner.compile``: the first update, compile included, and the median after it).

``--parts`` runs a subset (``tests,env,e2e,target,learners,models,update``).

Prints one markdown table per part and writes ``gpu_check.md`` / ``gpu_check.json`` under
``--out`` with the GPU's name, the commit and the date. ``--quick --device cpu`` runs every part
at toy sizes on a CPU machine (the test suite does, so the script cannot rot unseen).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import ray
import torch

from bench.bench_scaling import fixed_round, learner_rate
from bench.harness.results import write_suite
from bench.harness.stamp import stamp
from rl_system.algos.precision import update_autocast
from rl_system.config import load_config
from rl_system.envs import make_env
from rl_system.envs.base import Box, Discrete, MultiDiscrete
from rl_system.run.loop import train
from rl_system.run.summary import RunSummary

ENVS = {"CartPole": "launch/configs/cartpole_ppo_throughput.yaml", "Navigation": "launch/configs/navigation_ppo.yaml",
        "AirCombat": "launch/configs/air_combat_ppo.yaml"}


def random_actions(spec, n: int, k: int, device: str) -> list[torch.Tensor]:
    """``k`` batches of ``n`` random actions of ``spec`` on ``device``."""
    if isinstance(spec, Discrete):
        return [torch.randint(spec.n, (n,), device=device) for _ in range(k)]
    if isinstance(spec, MultiDiscrete):
        high = torch.tensor(spec.nvec, device=device)
        return [(torch.rand(n, len(spec.nvec), device=device) * high).long() for _ in range(k)]
    if isinstance(spec, Box):
        low, high = torch.tensor(spec.low, device=device), torch.tensor(spec.high, device=device)
        return [low + torch.rand(n, *spec.shape, device=device) * (high - low) for _ in range(k)]
    raise TypeError(f"no random actions for {spec}")


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def env_rate(name: str, n: int, device: str, seconds: float) -> float:
    """Env-only steps/s of ``n`` envs ``name`` on ``device``."""
    env = make_env(name, n, device, seed=0)
    env.reset()
    actions = random_actions(env.action_spec, n, 16, device)
    for a in actions:  # warm-up
        env.step(a)
    sync(device)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for a in actions:
            env.step(a)
        steps += len(actions) * n
        sync(device)
    rate = steps / (time.perf_counter() - t0)
    env.close()
    return rate


def gpu_settings(device: str, learners: int = 1) -> list[str]:
    """Overrides placing every worker and the learner(s) on the one GPU (shares of it)."""
    if not device.startswith("cuda"):
        return ["workers.device=cpu", "learner.device=cpu", "learner.num_cpus=0", "workers.num_cpus=0"]
    return ["workers.device=cuda", "workers.num_gpus=0.2", "learner.device=cuda", f"learner.num_gpus={0.4 / learners}",
            "learner.num_cpus=0", "workers.num_cpus=0"]  # GPU shares: the group uses gloo


def train_rate(config: str, device: str, steps: int, extra: list[str], out: Path) -> RunSummary:
    cfg = load_config(config, ["tensorboard=false", "log_every_s=1000", "checkpoint.every_rounds=0",
                               f"max_env_steps={steps}", *gpu_settings(device), *extra])
    return train(cfg, run_dir=out, quiet=True)


def learner_table(device: str, quick: bool) -> list[dict]:
    rows = []
    envs = 64 if quick else 4096
    base = ["workers.num_workers=2", f"workers.num_envs={envs}", "tensorboard=false", "max_policy_lag=1000000",
            "ppo.target_kl=null"]
    cfg = load_config(ENVS["CartPole"], base + ["workers.device=" + ("cuda" if device.startswith("cuda") else "cpu")])
    refs, specs = fixed_round(cfg)
    for n in (1, 2):
        cfg_n = load_config(ENVS["CartPole"], base + [f"learner.num_learners={n}", *gpu_settings(device, n)])
        rate, dt = learner_rate(cfg_n, refs, 2.0 if quick else 10.0, specs)
        rows.append({"learners": n, "samples_per_s": rate, "ms_per_update": 1e3 * dt})
    return rows


PARTS = ("tests", "env", "e2e", "target", "learners", "models", "update")
UPDATES = ("cartpole_ppo", "hopper_ppo", "minatar_breakout_ppo", "alice_bob_hmasd")


def update_table(device: str, quick: bool) -> list[dict]:
    """One update of each network in :data:`UPDATES` on ``device``, in each mode it can run:
    ``fp32`` and ``bf16`` (autocast) with autograd and, for PPO, ``compiled`` (first update and
    median after it) and ``closed_form`` (``learner.gradients``, fp32). Configs whose env is not
    installed are skipped with the reason; modes a config refuses, with its config-error line."""
    from bench.bench_update import build

    rows = []
    for name in UPDATES:
        modes = {"fp32": [], "bf16": ["learner.precision=bf16"], "compiled": ["learner.compile=true"],
                 "closed_form": ["learner.gradients=closed_form"]}
        for mode, extra in modes.items():
            sizes = ["workers.num_envs=4"] if quick else []
            grads = [] if mode == "closed_form" else ["learner.gradients=autograd"]
            try:
                cfg = load_config(f"launch/configs/{name}.yaml", [*sizes, *grads, *extra])
            except ValueError as err:  # HMASD refuses learner.compile and closed_form
                rows.append({"config": name, "mode": mode, "skipped": str(err).splitlines()[0]})
                continue
            try:
                trainer, batch = build(cfg, device=device)
            except ImportError as err:
                rows.append({"config": name, "mode": mode, "skipped": f"{type(err).__name__}: {err}".splitlines()[0]})
                continue
            rows.append({"config": name, "mode": mode, **time_update(trainer, batch, device, mode == "bf16",
                                                                     1 if quick else 5)})
    return rows


def time_update(trainer, batch: dict, device: str, bf16: bool, repeats: int) -> dict:
    """The first update (compile included where compiled) and the median of ``repeats`` after it."""
    def once() -> float:
        t0 = time.perf_counter()
        with update_autocast(torch.device(device).type, enabled=bf16):
            trainer.update(batch, 0.0)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    first = once()
    times = sorted(once() for _ in range(repeats))
    samples = int(batch["reward"].numel())
    median = times[len(times) // 2]
    return {"samples": samples, "first_s": first, "update_s": median, "samples_per_s": samples / median}
# The model paths beyond the MLP: HMASD's GRU levels and discriminators, the lidar CNN, recurrent PPO.
MODELS = {"AliceBob HMASD": "launch/configs/alice_bob_hmasd.yaml",
          "Navigation lidar CNN": "launch/configs/navigation_scan_ppo.yaml",
          "CartPole recurrent (GRU)": "launch/configs/cartpole_memory_ppo.yaml"}


def model_table(device: str, quick: bool, seconds: float, out: Path) -> list[dict]:
    """Each model path trained for ``seconds`` on ``device`` and, as the baseline on the same
    machine, with its shipped (CPU) settings."""
    rows = []
    for name, config in MODELS.items():
        for where in dict.fromkeys([device, "cpu"]):
            extra = [f"max_wall_s={seconds}", "target_return=null"] + (["workers.num_envs=16"] if quick else [])
            s = train_rate(config, where, 10_000 if quick else 10**9, extra, out / "runs" / f"model_{len(rows)}")
            rows.append({"model": name, "device": where, "env_steps": s.env_steps, "steps_per_s": s.steps_per_s,
                         "status": s.status, "final_mean_return": s.final_mean_return,
                         "final_success_rate": s.final_rates.get("success")})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/results/gpu_check")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help="toy sizes (a smoke test of the script)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--e2e-s", type=float, default=60.0, help="wall seconds per end-to-end run")
    ap.add_argument("--target-s", type=float, default=120.0, help="wall seconds allowed to reach CartPole 475")
    ap.add_argument("--models-s", type=float, default=45.0, help="wall seconds per model-path run")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device here (run it on a GPU machine, or --device cpu --quick to smoke-test it)")
    if parts - set(PARTS):
        sys.exit(f"gpu_check: unknown --parts {sorted(parts - set(PARTS))}; choose from {','.join(PARTS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"meta": stamp(), "device": args.device,
                    "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None}

    if "tests" in parts:
        # Collection errors (an optional benchmark package missing on the GPU image) must not hide the CUDA tests.
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "--continue-on-collection-errors",
                                "-p", "no:cacheprovider", "tests"], check=False, capture_output=True, text=True)
        result["cuda_tests"] = {"rc": tests.returncode, "tail": tests.stdout.strip().splitlines()[-1:] or [""]}
        (out / "cuda_tests.log").write_text(tests.stdout + tests.stderr)
        save(result, out)

    if "env" in parts:
        sizes = (256, 1024) if args.quick else (4096, 16384, 65536)
        result["env_only"] = [{"env": name, "envs": n,
                               "steps_per_s": env_rate(name, n, args.device, 0.3 if args.quick else 3.0)}
                              for name in ENVS for n in sizes]
        save(result, out)

    ray.init(num_cpus=8, num_gpus=1 if args.device.startswith("cuda") else 0, include_dashboard=False,
             log_to_driver=False, configure_logging=False)
    if "e2e" in parts:
        steps = 20_000 if args.quick else 5_000_000
        envs = 64 if args.quick else 8192
        result["end_to_end"] = []
        for name, config in ENVS.items():
            s = train_rate(config, args.device, steps,
                           [f"workers.num_envs={envs}", "target_return=null", f"max_wall_s={args.e2e_s}"],
                           out / "runs" / f"e2e_{name}")
            result["end_to_end"].append({"env": name, "envs_per_worker": envs, "env_steps": s.env_steps,
                                         "steps_per_s": s.steps_per_s})
            save(result, out)
    if "target" in parts:
        s = train_rate("launch/configs/cartpole_ppo.yaml", args.device, 60_000 if args.quick else 2_000_000,
                       [f"max_wall_s={args.target_s}"], out / "runs" / "cartpole_475")
        result["cartpole_475"] = {"reached": s.reached_target, "time_to_target_s": s.time_to_target_s,
                                  "steps_to_target": s.steps_to_target}
        save(result, out)
    if "learners" in parts:
        result["learners"] = learner_table(args.device, args.quick)
        save(result, out)
    if "models" in parts:
        result["models"] = model_table(args.device, args.quick, args.models_s, out)
        save(result, out)
    if "update" in parts:
        result["update"] = update_table(args.device, args.quick)
    ray.shutdown()
    print(save(result, out))


def save(result: dict, out: Path) -> str:
    """Write what has been measured so far (a run cut off by a time limit keeps its finished parts)."""
    text = render(result)
    write_suite(out, "gpu_check", result, text)
    return text


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def render(r: dict) -> str:
    """Markdown tables of the parts measured so far."""
    m = r["meta"]
    lines = [f"# GPU check ({m['date_utc']}, commit {m['commit']})", "",
             (f"`python -m bench.gpu_check` on {r['gpu'] or r['device']}; {m['cpu']} ({m['cores']} cores), "
              f"torch {m['torch']}, Ray {m['ray']}."), ""]
    if "cuda_tests" in r:
        lines += [f"CUDA tests: exit {r['cuda_tests']['rc']}, {r['cuda_tests']['tail'][0]}", ""]
    if "env_only" in r:
        lines += ["| env | envs | env-only steps/s |", "|---|---:|---:|"]
        lines += [f"| {e['env']} | {e['envs']:,} | {e['steps_per_s']:,.0f} |" for e in r["env_only"]]
    if r.get("end_to_end"):
        lines += ["", "| env | envs per worker (2 workers) | env steps | end-to-end steps/s |", "|---|---:|---:|---:|"]
        lines += [f"| {e['env']} | {e['envs_per_worker']:,} | {e['env_steps']:,} | {e['steps_per_s']:,.0f} |"
                  for e in r["end_to_end"]]
    if "cartpole_475" in r:
        c = r["cartpole_475"]
        shown = f"{c['time_to_target_s']:.1f} s ({c['steps_to_target']:,} env steps)" if c["reached"] else "not reached"
        lines += ["", f"CartPole to a mean return of 475: {shown}"]
    if "learners" in r:
        lines += ["", "| learners | learner samples/s | ms per update |", "|---:|---:|---:|"]
        lines += [f"| {x['learners']} | {x['samples_per_s']:,.0f} | {x['ms_per_update']:.1f} |" for x in r["learners"]]
    if r.get("models"):
        lines += ["", "| model path | workers + learner on | env steps | end-to-end steps/s | final return | success |",
                  "|---|---|---:|---:|---:|---:|"]
        lines += [f"| {x['model']} | {x['device']} | {x['env_steps']:,} | {x['steps_per_s']:,.0f} | "
                  f"{_num(x['final_mean_return'])} | {_num(x['final_success_rate'])} |" for x in r["models"]]
    if r.get("update"):
        lines += ["", "| network | mode | samples per update | first update | update (median) | samples/s |",
                  "|---|---|---:|---:|---:|---:|"]
        lines += [f"| {x['config']} | {x['mode']} | – | – | – | skipped: {x['skipped']} |" if "skipped" in x else
                  f"| {x['config']} | {x['mode']} | {x['samples']:,} | {x['first_s']:.2f} s | {1e3 * x['update_s']:,.1f} ms | "
                  f"{x['samples_per_s']:,.0f} |" for x in r["update"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
