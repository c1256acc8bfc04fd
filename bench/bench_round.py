"""Where one synchronous round of a shipped config goes, piece by piece: the pieces' compute in
this process, and the round's Ray traffic without the compute.

    python -m bench.bench_round [--config cartpole_ppo] [--repeats 40] [--out DIR]

In-process (each on the thread count its actor would use): a sampler step, a worker's ``sample``
call with a new version's weights (unpickled, as the call receives them), the learner's
``update`` call on the round's payloads (decode, the trainer's update, the weights), the trainer's
update alone (in the learner's precision), and the weights' pickle and unpickle-plus-first-use.

Ray traffic: stand-in actors that do no work but ship the round's real objects (the learner's
metrics and weights, the workers' metas and payloads) in the round's pattern — every worker
``sample(weights_ref, version)`` with two returns, the learner ``update(*payload_refs)`` with two
returns — with the weights and with ``None`` in their place, alternated round by round. The
difference is what the weights' trip costs a round; the rest is Ray's floor for the round's two
hops out and back.

Writes ``round.json`` / ``round.md`` to ``--out`` (default ``bench/results/round/``).
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from typing import Any

import ray
import torch

from bench.bench_update import REPO
from bench.harness.results import RESULTS, command_line, write_suite
from bench.harness.stamp import stamp
from bench.harness.timing import median_us, with_threads
from rl_system.actors.learner import Learner
from rl_system.actors.worker import RolloutWorker
from rl_system.algos.precision import update_autocast
from rl_system.config import RunConfig, load_config
from rl_system.device import resolve_threads
from rl_system.rollout import codec, contract
from rl_system.run.startup import init_ray, probe_specs


def _ms(fn, repeats: int) -> float:
    """Milliseconds per call of ``fn`` (:func:`~bench.harness.timing.median_us`'s stretches)."""
    return median_us(fn, max(repeats, 5)) / 1e3


def in_process_rows(cfg: RunConfig, repeats: int) -> tuple[list[tuple[str, float, str]], dict[str, Any]]:
    """``(piece, value, unit)`` rows, and the round's real objects for :func:`ray_rows`."""
    wc, lc = cfg.workers, cfg.learner
    worker_threads = resolve_threads(wc.torch_threads, wc.num_cpus)
    learner_threads = resolve_threads(lc.torch_threads, lc.num_cpus)
    workers = [RolloutWorker(i, cfg) for i in range(wc.num_workers)]
    learner = Learner(cfg, *probe_specs(cfg))
    version = [0]

    def arriving_weights():  # what a worker's call receives
        return pickle.loads(pickle.dumps(learner.get_weights(), protocol=5))

    def sample_new_version():
        weights = arriving_weights()
        version[0] += 1
        t0 = time.perf_counter()
        workers[0].sample(weights, version[0])
        return time.perf_counter() - t0

    sampler = workers[0].sampler
    rows = [(f"sampler step ({wc.num_envs} envs)", with_threads(worker_threads, lambda: _ms(sampler.collect, repeats))
             / wc.rollout_len * 1e3, "µs"),
            ("worker.sample, a new version's weights",
             with_threads(worker_threads, lambda: statistics.median(sample_new_version() for _ in range(repeats)) * 1e3),
             "ms")]
    payload_version = version[0]
    metas, payloads = zip(*(w.sample(arriving_weights(), payload_version) for w in workers))

    def learner_update():
        learner.version = payload_version  # the gate passes the same payloads every time
        return learner.update(*payloads)

    batch = contract.concat([codec.decode(p)[0] for p in payloads])

    def trainer_update():  # in the learner's precision, as its update call runs it
        with update_autocast(learner.device.type, enabled=learner.precision == "bf16"):
            return learner.algo.update(batch, 0.0)

    rows += [("learner.update (decode, update, weights)", with_threads(learner_threads, lambda: _ms(learner_update, repeats)), "ms"),
             ("  of which the trainer's update", with_threads(learner_threads, lambda: _ms(trainer_update, repeats)), "ms")]
    weights = learner.get_weights()
    blob = pickle.dumps(weights, protocol=5)
    rows += [("weights: pickle", median_us(lambda: pickle.dumps(weights, protocol=5), 200), "µs"),
             ("weights: unpickle", median_us(lambda: len(pickle.loads(blob)), 200), "µs")]
    metrics, _ = learner_update()
    shipped = {"metrics": metrics, "weights": weights, "metas": metas, "payloads": payloads,
               "weights_bytes": len(blob), "payload_bytes": [len(p) for p in payloads],
               "learner": f"{learner_threads} thread{'s' if learner_threads > 1 else ''}, {learner.precision}"}
    return rows, shipped


def ray_rows(cfg: RunConfig, shipped: dict[str, Any], rounds: int) -> list[tuple[str, float, str]]:
    """A round's Ray traffic with no compute, with the weights and without, alternated."""

    # Defined here, so Ray ships the classes by value (workers need not import bench/).
    @ray.remote(num_cpus=0)
    class LearnerStandIn:
        def __init__(self, metrics, weights):
            self.metrics, self.weights = metrics, weights

        def update(self, with_weights, *payloads):
            return self.metrics, (self.weights if with_weights else None)

    @ray.remote(num_cpus=0)
    class WorkerStandIn:
        def __init__(self, meta, payload):
            self.meta, self.payload, self.version = meta, payload, -1

        def sample(self, weights, version):
            if weights is not None and version > self.version:
                self.version = version
                len(weights)  # the weights are read, as set_weights reads them
            return self.meta, self.payload

    init_ray(cfg, None)
    learner = LearnerStandIn.remote(shipped["metrics"], shipped["weights"])
    workers = [WorkerStandIn.remote(m, p) for m, p in zip(shipped["metas"], shipped["payloads"])]
    refs = {}
    for with_weights in (True, False):
        metrics_ref, refs[with_weights] = learner.update.options(num_returns=2).remote(with_weights)
        ray.get(metrics_ref)
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(1, rounds + 1):
        for with_weights in (True, False):
            t0 = time.perf_counter()
            calls = [w.sample.options(num_returns=2).remote(refs[with_weights], r) for w in workers]
            ray.get([meta for meta, _ in calls])
            metrics_ref, refs[with_weights] = learner.update.options(num_returns=2).remote(
                with_weights, *[payload for _, payload in calls])
            ray.get(metrics_ref)
            times[with_weights].append(time.perf_counter() - t0)
    skip = rounds // 10  # warm-up
    return [("Ray: a round's traffic with the weights", statistics.median(times[True][skip:]) * 1e3, "ms"),
            ("Ray: the same without the weights", statistics.median(times[False][skip:]) * 1e3, "ms")]


def markdown(result: dict[str, Any]) -> str:
    s = result["stamp"]
    lines = [f"`{result['command']}`", "",
             f"Measured {s['date_utc']} at commit `{s['commit']}` on {s['cpu']} ({s['cores']} cores), torch {s['torch']}; "
             f"`{result['config']}` (learner: {result['learner']}): weights {result['weights_bytes']:,} bytes pickled, payloads "
             f"{', '.join(f'{b:,}' for b in result['payload_bytes'])} bytes.", "",
             "| piece | median | unit |", "|---|---:|---|"]
    lines += [f"| {piece} | {value:,.2f} | {unit} |" for piece, value, unit in result["rows"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="cartpole_ppo", help="a config under launch/configs/ (name without .yaml)")
    ap.add_argument("--repeats", type=int, default=40, help="timed calls per in-process piece")
    ap.add_argument("--rounds", type=int, default=300, help="rounds of Ray traffic per variant")
    ap.add_argument("--out", default=str(RESULTS / "round"))
    args = ap.parse_args(argv)
    cfg = load_config(str(REPO / "launch" / "configs" / f"{args.config}.yaml"))
    command = command_line("python -m bench.bench_round", argv)
    rows, shipped = in_process_rows(cfg, args.repeats)
    try:
        rows += ray_rows(cfg, shipped, args.rounds)
    finally:
        ray.shutdown()
    result = {"stamp": stamp(), "command": command, "config": args.config, "rows": rows,
              "weights_bytes": shipped["weights_bytes"], "payload_bytes": shipped["payload_bytes"],
              "learner": shipped["learner"]}
    text = markdown(result)
    print(text)
    write_suite(args.out, "round", result, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
