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

NAMESPACE = "rl_system"
STATUS_ACTOR = "rl-system-status"

# Exported as rl_system_<name> (gauges) and rl_system_<name>_total (counters), tagged with the run's
# name (``run``); Prometheus sees them with Ray's ``ray_`` prefix. rl_system.observe.grafana draws them.
GAUGES = (
    ("env_steps", "env steps collected and trained on"),
    ("steps_per_s", "env steps per second, learning on"),
    ("policy_version", "learner policy version"),
    ("return_mean", "mean return of the last completed episodes"),
    ("workers_alive", "rollout workers that answered this round"),
    ("compression_ratio", "raw / shipped rollout bytes"),
    ("checkpoint_save_s", "seconds the checkpointer took for its last save"),
    ("policy_lag_mean", "mean policy lag of trained-on rollouts"),
)
COUNTERS = (
    ("rollouts_dropped", "rollouts dropped by the policy-version gate"),
    ("worker_restarts", "rollout worker restarts"),
    ("reseeds", "fresh starts of a stalled run (reseed.at_env_steps)"),
    ("rollbacks", "returns to the best checkpoint after a collapse (rollback.drop)"),
    ("learner_restarts", "learners rebuilt from a checkpoint inside the run"),
    ("checkpointer_restarts", "Ray restarts of the checkpointer"),
    ("bytes_shipped", "rollout payload bytes sent through the object store"),
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
            f"{run}: {s.get('state', '?')} | round {s.get('round', 0):,} | {s.get('env_steps', 0):,} steps | "
            f"{s.get('steps_per_s', 0):,.0f} steps/s | return {s.get('return_mean', float('nan')):.2f} | "
            f"v{s.get('policy_version', 0)} (lag mean {s.get('policy_lag_mean', 0):.2f}) | "
            f"workers {s.get('workers_alive', 0)}/{s.get('num_workers', 0)} | dropped {s.get('rollouts_dropped', 0)} | "
            f"restarts {s.get('worker_restarts', 0)} | "
            + (f"learner rebuilt {s['learner_restarts']}x | " if s.get("learner_restarts") else "")
            + (f"reseeded on stall {s['reseeds']}x | " if s.get("reseeds") else "")
            + (f"rolled back {s['rollbacks']}x | " if s.get("rollbacks") else "")
            + f"updated {age:.0f}s ago")
    return "\n".join(lines)
