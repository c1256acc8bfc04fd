"""Live run status for people watching: Ray metrics (dashboard / Prometheus) and a status actor.

* Gauges and counters through ``ray.util.metrics`` (exported by every Ray node's metrics agent,
  shown in the dashboard's metrics view and scraped by Prometheus): env steps, steps/s, policy
  version, rollouts dropped by the gate, worker, learner and checkpointer restarts, payload bytes
  shipped and compression ratio, checkpoint save latency.
* A small named actor, ``rl-system-status`` in namespace ``rl_system``, holding the latest status
  dict; ``rl-system status --address auto`` reads it from any machine of the cluster.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from rl_system.observe.metrics import (
    BYTES_SHIPPED,
    CHECKPOINT_SAVE_S,
    CHECKPOINTER_RESTARTS,
    COMPRESSION_RATIO,
    ENV_STEPS,
    LEARNER_RESTARTS,
    NUM_WORKERS,
    POLICY_LAG_MEAN,
    POLICY_VERSION,
    RESEEDS,
    RETURN_MEAN,
    ROLLBACKS,
    ROLLOUTS_DROPPED,
    ROUND,
    RUN_STATE,
    STEPS_PER_S,
    WORKER_RESTARTS,
    WORKERS_ALIVE,
)

NAMESPACE = "rl_system"
STATUS_ACTOR = "rl-system-status"

# Exported as rl_system_<name> (gauges) and rl_system_<name>_total (counters), tagged with the run's
# name (``run``); Prometheus sees them with Ray's ``ray_`` prefix. rl_system.observe.grafana draws them.
GAUGES = (
    (ENV_STEPS, "env steps collected and trained on"),
    (STEPS_PER_S, "env steps per second, learning on"),
    (POLICY_VERSION, "learner policy version"),
    (RETURN_MEAN, "mean return of the last completed episodes"),
    (WORKERS_ALIVE, "rollout workers that answered this round"),
    (COMPRESSION_RATIO, "raw / shipped rollout bytes"),
    (CHECKPOINT_SAVE_S, "seconds the checkpointer took for its last save"),
    (POLICY_LAG_MEAN, "mean policy lag of trained-on rollouts"),
)
COUNTERS = (
    (ROLLOUTS_DROPPED, "rollouts dropped by the policy-version gate"),
    (WORKER_RESTARTS, "rollout worker restarts"),
    (RESEEDS, "fresh starts of a stalled run (reseed.at_env_steps)"),
    (ROLLBACKS, "returns to the best checkpoint after a collapse (rollback.drop)"),
    (LEARNER_RESTARTS, "learners rebuilt from a checkpoint inside the run"),
    (CHECKPOINTER_RESTARTS, "Ray restarts of the checkpointer"),
    (BYTES_SHIPPED, "rollout payload bytes sent through the object store"),
)


class StatusBoard:
    """Holds the newest status of each run that reports to it (a plain dict per run)."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}

    def report(self, run: str, status: dict[str, Any]) -> None:
        self.runs[run] = {**status, "updated_at": time.time()}

    def read(self) -> dict[str, dict[str, Any]]:
        return self.runs


class Telemetry:
    """Driver-side publisher; every call is cheap and never raises into the training loop."""

    def __init__(self, run_name: str):
        from ray.util.metrics import Counter, Gauge

        self.run = run_name
        tags = ("run",)
        self.gauges = {name: Gauge(f"rl_system_{name}", description=desc, tag_keys=tags) for name, desc in GAUGES}
        self.counters = {name: Counter(f"rl_system_{name}_total", description=desc, tag_keys=tags)
                         for name, desc in COUNTERS}
        self._last_counts: dict[str, float] = {}
        self.board = StatusBoardClient()

    def publish(self, status: dict[str, Any]) -> None:
        tags = {"run": self.run}
        for name, gauge in self.gauges.items():
            value = status.get(name)
            if isinstance(value, (int, float)) and value == value:  # skip None / NaN
                gauge.set(float(value), tags=tags)
        for name, counter in self.counters.items():
            total = float(status.get(name, 0) or 0)
            delta = total - self._last_counts.get(name, 0.0)
            if delta > 0:
                counter.inc(delta, tags=tags)
            self._last_counts[name] = total
        self.board.report(self.run, status)


class StatusBoardClient:
    """Finds or creates the status actor; reporting is fire-and-forget."""

    def __init__(self) -> None:
        try:
            self.actor = ray.remote(StatusBoard).options(
                name=STATUS_ACTOR, namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
                # DEFAULT: never captured into the placement group of the run that created it
                # (a Tune trial's), which goes away with that run.
                num_cpus=0, max_restarts=-1, scheduling_strategy="DEFAULT").remote()
        except Exception:  # noqa: BLE001 - status is a convenience, never a reason to fail
            self.actor = None

    def report(self, run: str, status: dict[str, Any]) -> None:
        if self.actor is not None:
            self.actor.report.remote(run, status)


def read_status(address: str | None) -> dict[str, dict[str, Any]]:
    """Connect to ``address`` and return every run's latest status (empty if none reported).
    :class:`ConnectionError` (one line, within seconds) when nothing listens at ``HOST:PORT``."""
    from rl_system.run.address import check_reachable

    check_reachable(address or "auto")
    ray.init(address=address or "auto", namespace=NAMESPACE, logging_level="ERROR", log_to_driver=False)
    try:
        actor = ray.get_actor(STATUS_ACTOR, namespace=NAMESPACE)
    except ValueError:
        return {}
    return ray.get(actor.read.remote(), timeout=10)


def format_status(runs: dict[str, dict[str, Any]]) -> str:
    if not runs:
        return "no rl_system run has reported on this cluster"
    lines = []
    for run, s in sorted(runs.items(), key=lambda kv: -kv[1].get("updated_at", 0)):
        age = time.time() - s.get("updated_at", time.time())
        lines.append(
            f"{run}: {s.get(RUN_STATE, '?')} | round {s.get(ROUND, 0):,} | {s.get(ENV_STEPS, 0):,} steps | "
            f"{s.get(STEPS_PER_S, 0):,.0f} steps/s | return {s.get(RETURN_MEAN, float('nan')):.2f} | "
            f"v{s.get(POLICY_VERSION, 0)} (lag mean {s.get(POLICY_LAG_MEAN, 0):.2f}) | "
            f"workers {s.get(WORKERS_ALIVE, 0)}/{s.get(NUM_WORKERS, 0)} | dropped {s.get(ROLLOUTS_DROPPED, 0)} | "
            f"restarts {s.get(WORKER_RESTARTS, 0)} | "
            + (f"learner rebuilt {s[LEARNER_RESTARTS]}x | " if s.get(LEARNER_RESTARTS) else "")
            + (f"reseeded on stall {s[RESEEDS]}x | " if s.get(RESEEDS) else "")
            + (f"rolled back {s[ROLLBACKS]}x | " if s.get(ROLLBACKS) else "")
            + f"updated {age:.0f}s ago")
    return "\n".join(lines)
