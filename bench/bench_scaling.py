"""Scaling on this machine: sampling and end-to-end throughput vs workers x envs per worker, and
bytes shipped per env step with and without compression; the learner group's throughput for
1 and 2 learners.

    python -m bench.bench_scaling [--steps 400000] [--parts workers learners]

Sampling-only rows call ``sample`` on every worker concurrently (no learner), so they show what
the workers alone deliver. End-to-end rows are full synchronous PPO rounds with the throughput
config (4 epochs). Per-component costs printed at the end feed the projection in docs/scaling.md.

The learner rows (:func:`learner_rows`) time ``update`` alone on a fixed set of rollouts (learner
samples/s: env steps trained on per second) for N learners, each with one torch thread, and
split a round into compute and all-reduce time, then run end to end with N learners.
"""

from __future__ import annotations

import argparse
import os
import time

import ray

from rl_system.actors.learner import Learner
from rl_system.actors.learner_group import LearnerGroup, merged_metrics
from rl_system.actors.worker import RolloutWorker
from rl_system.config import load_config
from rl_system.observe.metrics import LEARNER_ENV_STEPS
from rl_system.run.loop import train

CONFIG = "launch/configs/cartpole_ppo_throughput.yaml"


def sampling_rate(cfg, seconds: float = 4.0) -> tuple[float, float]:
    """(env steps/s across all workers, payload bytes per env step), sampling only."""
    workers = [ray.remote(RolloutWorker).options(num_cpus=0).remote(i, cfg.model_dump())
               for i in range(cfg.workers.num_workers)]
    learner = Learner(cfg, *ray.get(workers[0].specs.remote()))
    weights = ray.put(learner.get_weights())
    ray.get([w.sample.options(num_returns=2).remote(weights, 0)[0] for w in workers])  # warm-up
    steps, nbytes, t0 = 0, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        metas = ray.get([w.sample.options(num_returns=2).remote(weights, 0)[0] for w in workers])
        steps += sum(m.env_steps for m in metas)
        nbytes += sum(m.payload_bytes for m in metas)
    rate = steps / (time.perf_counter() - t0)
    for w in workers:
        ray.kill(w)
    return rate, nbytes / steps


def fixed_round(cfg) -> tuple[list, tuple]:
    """One round of ``cfg``'s workers (in-process) sampled with fresh weights, put in the object
    store: ``(payload refs in worker order, the env's specs)``, for :func:`learner_rate`."""
    workers = [RolloutWorker(i, cfg) for i in range(cfg.workers.num_workers)]
    specs = workers[0].specs()
    weights = Learner(cfg, *specs).get_weights()
    return [ray.put(w.sample(weights, 0)[1]) for w in workers], specs


def learner_rate(cfg, payload_refs: list, seconds: float, specs) -> tuple[float, float]:
    """``(env steps trained on per second, seconds per update)`` of a learner group of
    ``cfg.learner.num_learners`` updating on ``payload_refs`` again and again. The gate is off
    (``max_policy_lag`` large): the same rollouts stay trainable while the version climbs."""
    group = LearnerGroup(cfg, specs, f"bench-learners-{cfg.learner.num_learners}")
    try:
        ray.get(list(group.start_refs()))
        group.form()
        result = merged_metrics(group.wait(group.update(payload_refs)[0]))  # warm-up
        steps_per_update = result.system[LEARNER_ENV_STEPS]
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            group.wait(group.update(payload_refs)[0])
            n += 1
        dt = (time.perf_counter() - t0) / n
        return steps_per_update / dt, dt
    finally:
        group.kill()


def learner_rows(args) -> list[tuple]:
    """Learner samples/s for 1 and 2 learners on one round of ``workers x envs x T`` rollouts,
    and end-to-end steps/s with that many learners."""
    rows = []
    base = ["workers.num_workers=4", "workers.num_envs=512", "tensorboard=false", "log_every_s=1000",
            "checkpoint.every_rounds=0", "target_return=null", "max_policy_lag=1000000", "learner.num_cpus=0.5"]
    refs, specs = fixed_round(load_config(CONFIG, base))
    # One learner with one and with two threads, two learners with one thread each (the same two
    # cores); target_kl off so that every update runs all its minibatch steps.
    for n, threads in ((1, 1), (1, 2), (2, 1)):
        setting = [f"learner.num_learners={n}", f"learner.torch_threads={threads}", "ppo.target_kl=null"]
        rate, dt = learner_rate(load_config(CONFIG, base + setting), refs, args.learner_seconds, specs)
        e2e = train(load_config(CONFIG, base + setting + ["max_policy_lag=0", f"max_env_steps={args.steps}"]),
                    run_dir=f"/tmp/rl_scaling/learners{n}x{threads}", quiet=True)
        rows.append((n, threads, rate, 1e3 * dt, e2e["steps_per_s"]))
    return rows


def _allreduce_rank(rank: int, port: int, sizes: tuple[int, ...], out) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    for n in sizes:
        t = torch.zeros(n)
        for _ in range(50):  # warm-up
            dist.all_reduce(t)
        t0 = time.perf_counter()
        for _ in range(500):
            dist.all_reduce(t)
        if rank == 0:
            out[n] = (time.perf_counter() - t0) / 500
    dist.destroy_process_group()


def allreduce_latency(sizes: tuple[int, ...] = (3_000, 300_000)) -> dict[int, float]:
    """Seconds per gloo all-reduce of ``n`` float32 between two processes on this machine (no Ray)."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out = mp.Manager().dict()
    procs = [mp.Process(target=_allreduce_rank, args=(r, port, sizes, out)) for r in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return dict(out)


STEPS_PER_UPDATE = 16  # the throughput config: 4 epochs x 4 minibatches
ROLLOUT = 512 * 16     # env steps per worker per round: 512 envs x 16 steps


def projection(rows: list[tuple], sample_rate: float) -> list[tuple]:
    """Measured-cost projection of rounds for W workers and N learners, synchronous and overlapped.

    From the measurements: ``c``, one learner's seconds per env step trained on (one thread);
    ``o``, the group's extra seconds per minibatch step (``t_2 - t_1 / 2`` over the minibatch
    steps of an update: the all-reduce and whatever two learners lose to each other on this
    machine); ``s``, one worker's sampling rate. Returns ``(W, N, sync env steps/s, overlapped env
    steps/s, share of the synchronous round spent learning)``: see :func:`project_round`."""
    t1 = next(r[3] for r in rows if r[:2] == (1, 1)) / 1e3
    t2 = next(r[3] for r in rows if r[:2] == (2, 1)) / 1e3
    c = t1 / (4 * ROLLOUT)  # the measured update trained on 4 rollouts
    o = max(t2 - t1 / 2, 0.0) / STEPS_PER_UPDATE
    return [project_round(w, n, c, o, sample_rate) for w in (8, 64, 512) for n in (1, 8, 64)]


def project_round(w: int, n: int, c: float, o: float, s: float) -> tuple[int, int, float, float, float]:
    """One round of ``w`` rollouts (``ROLLOUT`` env steps each) for ``n`` learners: sampling takes
    ``ROLLOUT / s`` (the workers in parallel), learning ``w * ROLLOUT * c / n + STEPS_PER_UPDATE * o``
    (``o`` = 0 for one learner). Synchronous rounds (``max_policy_lag: 0``) take the sum; overlapped
    ones (lag 1: the next round samples while the learners update, workers and learners on their
    own cores) the larger of the two. ``(w, n, sync steps/s, overlapped steps/s, learning share)``."""
    learn = w * ROLLOUT * c / n + (STEPS_PER_UPDATE * o if n > 1 else 0.0)
    sample = ROLLOUT / s
    return w, n, w * ROLLOUT / (sample + learn), w * ROLLOUT / max(sample, learn), learn / (sample + learn)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400_000)
    ap.add_argument("--parts", nargs="+", choices=["workers", "learners"], default=["workers", "learners"])
    ap.add_argument("--learner-seconds", type=float, default=8.0)
    args = ap.parse_args()
    ray.init(num_cpus=max(os.cpu_count() or 1, 5), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    if "workers" in args.parts:
        worker_table(args)
    if "learners" in args.parts:
        rows = learner_rows(args)
        print(f"learner group: {CONFIG}, one round = 4 workers x 512 envs x 16 steps = 32,768 env steps, "
              f"1 torch thread per learner")
        print(f"{'learners':>8} {'threads':>8} {'learner samples/s':>18} {'ms/update':>10} {'e2e steps/s':>12}")
        for r in rows:
            print(f"{r[0]:>8} {r[1]:>8} {r[2]:>18,.0f} {r[3]:>10.1f} {r[4]:>12,.0f}")
        for n, sec in allreduce_latency().items():
            print(f"gloo all-reduce of {n:,} float32 between two processes (no Ray): {1e3 * sec:.2f} ms")
        sample_rate, _ = sampling_rate(load_config(CONFIG, ["workers.num_workers=1", "workers.num_envs=512",
                                                            "compression=none"]))
        print(f"projection (synchronous and lag-1 rounds, 512 envs x 16 steps per worker; one worker samples "
              f"{sample_rate:,.0f} steps/s here)")
        print(f"{'workers':>7} {'learners':>8} {'sync steps/s':>13} {'lag-1 steps/s':>14} {'learning share':>15}")
        for w, n, rate, overlapped, share in projection(rows, sample_rate):
            print(f"{w:>7} {n:>8} {rate:>13,.0f} {overlapped:>14,.0f} {share:>15.0%}")


def worker_table(args) -> None:
    rows = []
    for workers in (1, 2, 4):
        for envs in (64, 512):
            base = [f"workers.num_workers={workers}", f"workers.num_envs={envs}", "tensorboard=false",
                    "log_every_s=1000", "checkpoint.every_rounds=0", "target_return=null"]
            cfg = load_config(CONFIG, base + ["compression=none"])
            sample_sps, raw_bps = sampling_rate(cfg)
            _, lz4_bps = sampling_rate(load_config(CONFIG, base + ["compression=lz4"]), seconds=1.0)
            s = train(load_config(CONFIG, base + [f"max_env_steps={args.steps}"]), run_dir=f"/tmp/rl_scaling/{workers}x{envs}",
                      quiet=True)
            b = s.time_breakdown_s
            rows.append((workers, envs, sample_sps, s.steps_per_s, raw_bps, lz4_bps,
                         1e6 * b.update / s.env_steps, 1e3 * (b.rounds - b.update) / s.rounds))
    print(f"machine: {os.cpu_count()} CPUs; config {CONFIG} (4 epochs); end-to-end runs of {args.steps:,} steps")
    print(f"{'workers':>7} {'envs/w':>7} {'sample steps/s':>15} {'e2e steps/s':>12} {'B/step raw':>11} "
          f"{'B/step lz4':>11} {'learn us/step':>14} {'gather ms/rnd':>14}")
    for r in rows:
        print(f"{r[0]:>7} {r[1]:>7} {r[2]:>15,.0f} {r[3]:>12,.0f} {r[4]:>11.1f} {r[5]:>11.1f} {r[6]:>14.2f} {r[7]:>14.1f}")


if __name__ == "__main__":
    main()
