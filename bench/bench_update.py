"""How fast is the learner's update, against what the hardware can do? For each shipped network:
one round's batch in the config's geometry, the trainer's ``update`` timed in this process, its
floating-point work counted, and the achieved FLOP/s set against this machine's measured matmul
peak (the physical limit of a dense update).

    python -m bench.bench_update [--configs NAME ...] [--threads N] [--repeats 7] [--compile]
                                 [--closed-form] [--malloc retain|system] [--set KEY=VALUE ...]
                                 [--alternate OVERRIDES OVERRIDES ...] [--out DIR]

NAME is a config under ``launch/configs/`` without ``.yaml`` (default: the MLP of CartPole and
Hopper, MinAtar's CNN, the GRU of memory CartPole, HMASD on AliceBob); configs whose env is not
installed are skipped with a line saying so. The batch is what one round hands the learner
(``workers.num_workers × workers.num_envs`` envs × ``workers.rollout_len`` steps), sampled by the
untrained policy; the update is the config's (its epochs, minibatches and learning rate). FLOPs
come from ``torch.utils.flop_counter.FlopCounterMode`` over one update (matmuls and convolutions,
forward and backward: the arithmetic that a faster update cannot avoid). The matmul peak is the
best of square fp32 ``torch.mm`` sizes 256-2048 on the same threads. ``--compile`` adds, for PPO
configs, the same update with ``learner.compile: true`` (``torch.compile`` of the loss): its
first update (the compile, from inductor's on-disk cache where it has one) and its median.
``--closed-form`` adds, for PPO configs whose policy it serves, the update with ``learner.gradients:
closed_form`` (:mod:`rl_system.algos.ppo.analytic`), timed in turn with the autograd update on the
same batch. The main columns are always autograd's, whatever the config ships.
``--malloc system`` runs with glibc's own heap thresholds instead of the learner's ``retain``
(:mod:`rl_system.heap`); the table counts the minor page faults of each update either way.
``--set KEY=VALUE`` overrides every config's key, as ``rl-system train --set`` (e.g.
``mappo.num_epochs=3`` for fewer minibatch steps per update). ``--alternate`` times variants of
each config in turn, ``--repeats`` times each, so that a machine's changing load falls on all of
them alike: each argument is one variant, its overrides separated by commas (so a value in it
holds no comma: ``--set`` takes those), e.g. ``mappo.central_value=per_agent
mappo.central_value=joint``; a trainer per variant, built from
the same seed, updates the batch sampled by the first variant's policy (a row per variant, with
the share of its FLOPs in the policy's critic where it has one).

Prints a table and writes ``update_<N>thread(s).json`` / ``.md`` to ``--out`` (default
``bench/results/update/``).
"""
from __future__ import annotations

import argparse
import copy
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from bench.harness.results import RESULTS, write_suite
from bench.harness.stamp import ROOT, load1, stamp
from rl_system.algos import get_algorithm
from rl_system.config import load_config
from rl_system.heap import configure_malloc

REPO = ROOT
DEFAULT = ["cartpole_ppo", "hopper_ppo", "minatar_breakout_ppo", "cartpole_memory_ppo", "alice_bob_hmasd"]


def matmul_peak(threads: int, seconds: float = 0.3) -> tuple[float, int]:
    """``(GFLOP/s, size)``: the best square fp32 ``torch.mm`` on ``threads`` threads."""
    torch.set_num_threads(threads)
    best = (0.0, 0)
    for n in (256, 512, 1024, 2048):
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        count, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            torch.mm(a, b)
            count += 1
        rate = 2 * n ** 3 * count / (time.perf_counter() - t0) / 1e9
        best = max(best, (rate, n))
    return best


def build(cfg: Any, device: str = "cpu") -> tuple[Any, dict[str, torch.Tensor]]:
    """The trainer for ``cfg`` (its policy on ``device``) and one round's batch there:
    ``num_workers × num_envs`` envs sampled at once on the CPU by the untrained policy, as the
    learner receives them joined along the env axis."""
    from rl_system.envs import make_env

    configure_malloc(cfg.malloc)  # the heap policy of the learner process
    wc = cfg.workers
    env = make_env(cfg.env.name, wc.num_workers * wc.num_envs, "cpu", seed=cfg.seed, **cfg.env.kwargs)
    algo = get_algorithm(cfg.algo)
    torch.manual_seed(cfg.seed)
    policy = algo.make_policy(env.observation_spec, env.action_spec, cfg)
    sampler = algo.make_sampler(env, policy, cfg, torch.device("cpu"))
    sampler.reset(cfg.seed)
    with torch.no_grad():
        cols, _ = sampler.collect()
    batch = {k: v.to(device, copy=True) for k, v in cols.items()}
    env.close()
    return algo.make_trainer(policy.to(device), cfg), batch


def eager_config(name: str, malloc: str, overrides: list[str]) -> Any:
    """Shipped config ``name`` with the eager autograd update, the heap policy ``malloc`` and
    ``overrides`` (whatever the config ships as ``learner.compile`` and ``learner.gradients``)."""
    return load_config(str(REPO / "launch" / "configs" / f"{name}.yaml"),
                       ["learner.compile=false", "learner.gradients=autograd", f"malloc={malloc}", *overrides])


def critic_flops(trainer: Any, batch: dict[str, torch.Tensor]) -> int | None:
    """The FLOPs of a feedforward MAPPO update's critic: every epoch passes once over the batch,
    so ``num_epochs`` times its forward and backward over all the batch's rows; None for other
    trainers (their critic is not a call of its own)."""
    from rl_system.algos.mappo.trainer import MAPPO
    from rl_system.rollout.contract import observations

    if not isinstance(trainer, MAPPO) or trainer.recurrent:
        return None
    obs = observations(trainer.prepare(batch))
    with FlopCounterMode(display=False) as counter:
        trainer.policy.value(obs).sum().backward()
    trainer.policy.zero_grad(set_to_none=True)
    return trainer.cfg.num_epochs * counter.get_total_flops()


def alternating(name: str, threads: int, repeats: int, variants: list[list[str]], sets: list[str],
                malloc: str = "retain") -> list[dict[str, Any]]:
    """A row per variant of config ``name`` (each a list of overrides), their updates timed in turn
    on one batch (the first variant's sample): round ``r`` times every variant once."""
    cfgs = [eager_config(name, malloc, [*sets, *v]) for v in variants]
    torch.set_num_threads(threads)
    trainer, batch = build(cfgs[0])
    trainers = [trainer]
    for cfg in cfgs[1:]:
        torch.manual_seed(cfg.seed)
        policy = get_algorithm(cfg.algo).make_policy(*specs_of(cfg), cfg)
        trainers.append(get_algorithm(cfg.algo).make_trainer(policy, cfg))
    samples = int(batch["reward"].numel())
    rows = []
    for v, t in zip(variants, trainers):
        t.update(batch, 0.0)  # warm-up: allocator, first-call paths
        with FlopCounterMode(display=False) as counter:
            t.update(batch, 0.0)
        critic = critic_flops(t, batch)
        rows.append({"config": name, "variant": ",".join(v), "algo": cfgs[0].algo, "samples": samples,
                     "gflop": counter.get_total_flops() / 1e9,
                     "critic_flop_share": None if critic is None else critic / counter.get_total_flops(),
                     "params": sum(p.numel() for p in t.policy.parameters()), "times": [], "faults": []})
    for _ in range(repeats):
        for row, t in zip(rows, trainers):
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            t.update(batch, 0.0)
            row["times"].append(time.perf_counter() - t0)
            row["faults"].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    for row in rows:
        times = row["times"]
        t = statistics.median(times)
        row.update(update_s=t, update_s_min=min(times), samples_per_s=samples / t, gflop_per_s=row["gflop"] / t,
                   page_faults=statistics.median(row.pop("faults")))
    return rows


def specs_of(cfg: Any) -> tuple[dict, Any]:
    """``(observation_spec, action_spec)`` of ``cfg``'s env."""
    from rl_system.envs import make_env

    env = make_env(cfg.env.name, 1, "cpu", seed=cfg.seed, **cfg.env.kwargs)
    try:
        return env.observation_spec, env.action_spec
    finally:
        env.close()


def compiled_times(name: str, repeats: int, malloc: str = "retain") -> dict[str, float]:
    """The first update (compile included) and the median update with ``learner.compile: true``."""
    cfg = load_config(str(REPO / "launch" / "configs" / f"{name}.yaml"),
                      ["learner.compile=true", "learner.gradients=autograd", f"malloc={malloc}"])
    trainer, batch = build(cfg)
    t0 = time.perf_counter()
    metrics = trainer.update(batch, 0.0)
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        trainer.update(batch, 0.0)
        times.append(time.perf_counter() - t0)
    return {"compiled_first_s": first, "compiled_update_s": statistics.median(times),
            "compiled": bool(metrics.get("compiled"))}


def closed_form_times(trainer: Any, cfg: Any, batch: dict[str, torch.Tensor], repeats: int) -> dict[str, float]:
    """The median update with ``learner.gradients: closed_form``, each timed right after one of
    ``trainer``'s (autograd) on the same batch, and autograd's median of those turns; {} where the
    policy is not one the closed form serves."""
    from rl_system.algos.ppo.analytic import unsupported

    if unsupported(trainer.policy) is not None:
        return {}
    closed = get_algorithm("ppo").make_trainer(copy.deepcopy(trainer.policy),
                                               cfg.model_copy(update={"learner": cfg.learner.model_copy(
                                                   update={"gradients": "closed_form"})}))
    closed.update(batch, 0.0)
    times: dict[str, list[float]] = {"autograd": [], "closed_form": []}
    for _ in range(repeats):
        for key, t in (("autograd", trainer), ("closed_form", closed)):
            t0 = time.perf_counter()
            t.update(batch, 0.0)
            times[key].append(time.perf_counter() - t0)
    return {"closed_form_update_s": statistics.median(times["closed_form"]),
            "autograd_beside_s": statistics.median(times["autograd"])}


def measure(name: str, threads: int, repeats: int, compile_too: bool = False, malloc: str = "retain",
            closed_form_too: bool = False, sets: list[str] = ()) -> dict[str, Any]:
    # The eager autograd update, whether or not the config ships learner.compile (compiled_times
    # has that) or learner.gradients: closed_form (closed_form_times).
    cfg = eager_config(name, malloc, sets)
    torch.set_num_threads(threads)
    trainer, batch = build(cfg)
    samples = int(batch["reward"].numel())
    trainer.update(batch, 0.0)  # warm-up: allocator, first-call paths
    with FlopCounterMode(display=False) as counter:
        trainer.update(batch, 0.0)
    flops = counter.get_total_flops()
    times, faults = [], []
    for _ in range(repeats):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        trainer.update(batch, 0.0)
        times.append(time.perf_counter() - t0)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    t = statistics.median(times)
    params = sum(p.numel() for p in trainer.policy.parameters()) if hasattr(trainer, "policy") else None
    row = {"config": name, "algo": cfg.algo, "samples": samples, "update_s": t, "update_s_min": min(times),
           "times": times, "samples_per_s": samples / t, "gflop": flops / 1e9, "gflop_per_s": flops / t / 1e9, "params": params,
           "page_faults": statistics.median(faults)}
    if compile_too and cfg.algo == "ppo":
        row.update(compiled_times(name, repeats, malloc))
    if closed_form_too and cfg.algo == "ppo":
        row.update(closed_form_times(trainer, cfg, batch, repeats))
    return row


def configs_arg(rows: list[dict[str, Any]]) -> str:
    """`` --configs A B`` where the rows' configs are not the default set."""
    names = list(dict.fromkeys(r["config"] for r in rows))
    return "" if names == DEFAULT else f" --configs {' '.join(names)}"


def load_note(s: dict[str, Any]) -> str:
    """``; 1-minute load 3.1 before, 4.2 after`` from the stamp, where it has them."""
    loads = [f"{s[k]} {when}" for k, when in (("load_1m_before", "before"), ("load_1m_after", "after"))
             if s.get(k) is not None]
    return f"; 1-minute load {', '.join(loads)}" if loads else ""


def markdown(result: dict[str, Any]) -> str:
    s, peak = result["stamp"], result["matmul_peak_gflop_per_s"]
    repeats = f" --repeats {result['repeats']}" if "repeats" in result else ""
    head = (f"Measured {s['date_utc']} at commit `{s['commit']}` on {s['cpu']} ({s['cores']} cores), torch "
            f"{s['torch']}, {result['threads']} thread(s); matmul peak {peak:.1f} GFLOP/s (fp32 `torch.mm` "
            f"{result['matmul_peak_size']}²). `python -m bench.bench_update{configs_arg(result['rows'])}"
            f" --threads {result['threads']}{repeats}"
            f"{' --compile' if result.get('compile') else ''}{' --closed-form' if result.get('closed_form') else ''}"
            f"{' --malloc system' if result.get('malloc') == 'system' else ''}"
            f"{''.join(f' --set {kv}' for kv in result.get('set', []))}"
            f"{' --alternate ' + ' '.join(result['alternate']) if result.get('alternate') else ''}`"
            f"{load_note(s)}.")
    columns = ("| config | algo | samples per update | update (median) | samples/s | GFLOP per update | GFLOP/s "
               "| of matmul peak | page faults per update |")
    lines = [head, "", columns, "|---|---|---|---|---|---|---|---|---|"]
    compiled = any("compiled_update_s" in r for r in result["rows"])
    if compiled:
        lines[2] += " compiled update | first compiled update |"
        lines[3] += "---|---|"
    closed = any("closed_form_update_s" in r for r in result["rows"])
    if closed:
        lines[2] += " closed-form update (autograd beside it) |"
        lines[3] += "---|"
    alternated = any("variant" in r for r in result["rows"])
    if alternated:
        lines[2] += " against the first variant | critic's share of the FLOPs | each update (in turn) |"
        lines[3] += "---|---|---|"
    first: dict[str, float] = {}
    for r in result["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['config']} | – | – | – | – | – | – | skipped: {r['skipped']} | – |")
            continue
        shown = f"{r['config']} ({r['variant']})" if "variant" in r else r["config"]
        lines.append(f"| {shown} | {r['algo']} | {r['samples']:,} | {r['update_s'] * 1e3:,.1f} ms | "
                     f"{r['samples_per_s']:,.0f} | {r['gflop']:.3f} | {r['gflop_per_s']:.1f} | "
                     f"{100 * r['gflop_per_s'] / peak:.1f}% | {r.get('page_faults', float('nan')):,.0f} |")
        if compiled:
            lines[-1] += (f" {r['compiled_update_s'] * 1e3:,.1f} ms ({r['update_s'] / r['compiled_update_s']:.2f}×) | "
                          f"{r['compiled_first_s']:.1f} s |" if "compiled_update_s" in r else " – | – |")
        if closed:
            lines[-1] += (f" {r['closed_form_update_s'] * 1e3:,.1f} ms ({r['autograd_beside_s'] * 1e3:,.1f} ms, "
                          f"{r['autograd_beside_s'] / r['closed_form_update_s']:.2f}×) |"
                          if "closed_form_update_s" in r else " – |")
        if alternated:
            base = first.setdefault(r["config"], r["update_s"])
            share = r.get("critic_flop_share")
            lines[-1] += (f" {r['update_s'] / base:.2f}× | {'–' if share is None else f'{100 * share:.0f}%'} | "
                          f"{', '.join(f'{t:.2f}' for t in r.get('times', []))} s |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", nargs="+", default=DEFAULT)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--compile", action="store_true", help="also time PPO updates with learner.compile: true")
    ap.add_argument("--closed-form", action="store_true",
                    help="also time PPO updates with learner.gradients: closed_form, in turn with autograd's")
    ap.add_argument("--malloc", choices=["retain", "system"], default="retain",
                    help="the heap policy (rl_system.heap); retain is the learner's default")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override every config's key (repeatable), as rl-system train --set")
    ap.add_argument("--alternate", nargs="+", metavar="OVERRIDES",
                    help="variants timed in turn, each a comma-separated list of KEY=VALUE overrides")
    ap.add_argument("--out", type=Path, default=RESULTS / "update")
    args = ap.parse_args(argv)
    st = stamp()
    rows = []
    for name in args.configs:
        try:
            if args.alternate:
                variants = [[kv for kv in v.split(",") if kv] for v in args.alternate]
                rows += alternating(name, args.threads, args.repeats, variants, args.set, args.malloc)
            else:
                rows.append(measure(name, args.threads, args.repeats, compile_too=args.compile, malloc=args.malloc,
                                    closed_form_too=args.closed_form, sets=args.set))
        except ImportError as err:  # an env whose extra is not installed
            rows.append({"config": name, "skipped": f"{type(err).__name__}: {err}".splitlines()[0]})
        print(rows[-1], flush=True)
    st["load_1m_after"] = load1()
    # After the updates: the peak's large matrices, once freed, would raise glibc's dynamic mmap
    # threshold and hide the page faults a learner process meets (rl_system.heap).
    peak, size = matmul_peak(args.threads)
    result = {"stamp": st, "threads": args.threads, "compile": args.compile, "closed_form": args.closed_form,
              "malloc": args.malloc, "set": args.set, "alternate": args.alternate, "repeats": args.repeats,
              "matmul_peak_gflop_per_s": peak,
              "matmul_peak_size": size, "rows": rows}
    text = markdown(result)
    print("\n" + text)
    name = (f"update_{args.threads}thread{'s' if args.threads > 1 else ''}"
            f"{'_malloc-system' if args.malloc == 'system' else ''}{'_alternate' if args.alternate else ''}")
    write_suite(args.out, name, result, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
