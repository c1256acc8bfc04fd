"""``summary.json``: a run's outcome and where its time went, as :class:`RunSummary`.

The run loop builds it (:func:`rl_system.run.reporting.summary`) and returns it; the code inside the
package reads its fields. On disk it is :meth:`RunSummary.to_json` (written key-sorted), the shape
people and tools read: one key per field, the nested figures as objects, and each episode outcome's
rate as its own ``final_<outcome>_rate`` key (``final_success_rate``). :meth:`RunSummary.from_json`
reads that shape back. Only the standard library is imported here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any

_FINAL_PREFIX, _RATE_SUFFIX, _MEAN_SUFFIX = "final_", "_rate", "_mean"
_SPELLED = {"final_rates": _RATE_SUFFIX, "final_means": _MEAN_SUFFIX}
"""The fields written as one ``summary.json`` key per entry, and their keys' suffix."""


def rate_key(outcome: str) -> str:
    """The ``summary.json`` key of an episode outcome's final rate: ``success`` -> ``final_success_rate``."""
    return f"{_FINAL_PREFIX}{outcome}{_RATE_SUFFIX}"


@dataclass
class CheckpointTally:
    """The run's checkpoint saves (the checkpointer's counts over its restarts)."""

    saved: int = 0
    skipped: int = 0  # a newer save arrived first: newest wins
    failed: int = 0
    last_error: str | None = None
    last_path: str | None = None  # the newest checkpoint written


@dataclass
class RunPlacement:
    """The node ids the run's actors ran on."""

    learner: str | None  # rank 0's
    learners: list[str]  # per learner rank
    workers: list[str]  # per rollout worker


@dataclass
class TimeBreakdown:
    """Seconds summed over rounds."""

    gather: float  # sampling: from a round's start until its rollouts are in
    update: float  # the learner's update
    rounds: float  # whole rounds


@dataclass
class CpuSeconds:
    """CPU seconds of the work itself: on a shared machine the steadier measure of what a run costs."""

    workers: float  # sampling and encoding
    learner: float  # decoding and updating
    total: float


_NESTED: dict[str, type] = {"checkpoints": CheckpointTally, "placement": RunPlacement,
                            "time_breakdown_s": TimeBreakdown, "cpu_s": CpuSeconds}
"""The fields held as objects in ``summary.json``, and their classes."""


@dataclass
class RunSummary:
    """A run's outcome; the fields are ``summary.json``'s keys, in its order (``final_rates`` and
    ``final_means`` aside)."""

    status: str  # completed, stopped, failed or interrupted
    error: str | None  # the one line a failed run ended with
    checkpoints: CheckpointTally
    env: str
    algo: str
    seed: int
    env_steps: int
    rounds: int
    policy_version: int
    wall_time_s: float
    startup_s: float
    steps_per_s: float
    target_return: float | None
    reached_target: bool
    time_to_target_s: float | None
    steps_to_target: int | None
    final_mean_return: float | None
    best_mean_return: float | None
    episodes: int
    final_rates: dict[str, float]
    """Each episode outcome's rate over the final return window; ``final_<outcome>_rate`` on disk."""
    final_means: dict[str, float]
    """Each of the env's episode stats' mean over the final return window; ``final_<stat>_mean`` on disk."""
    dropped_rollouts: int
    rollouts_per_worker: list[int]
    max_policy_lag_used: int
    worker_failures: int
    worker_restarts: int
    learner_restarts: int
    checkpointer_restarts: int
    archiver_restarts: int
    reseeds: list[dict[str, Any]]
    rollbacks: list[dict[str, Any]]
    bytes_shipped: int
    compression_ratio: float | None
    compression: list[str]
    placement: RunPlacement
    num_learners: int
    selfplay_pool_versions: list[int] | None
    archives_written: int
    archives_skipped: int
    time_breakdown_s: TimeBreakdown
    phases_s: dict[str, float]
    run_dir: str
    cpu_s: CpuSeconds

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` object: the fields in order, the nested ones as objects, and
        ``final_rates`` and ``final_means`` spelled out as ``final_<outcome>_rate`` and
        ``final_<stat>_mean`` keys where they stand."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _SPELLED:
                out.update({f"{_FINAL_PREFIX}{k}{_SPELLED[f.name]}": v for k, v in value.items()})
            else:
                out[f.name] = asdict(value) if is_dataclass(value) else value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        """A summary from :meth:`to_json`'s shape (``json.load`` of a ``summary.json``). Keys it
        does not know are left out; a missing key is a ``TypeError`` naming it."""
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        for name, kind in _NESTED.items():
            if name in kwargs:
                kwargs[name] = kind(**kwargs[name])
        for name, suffix in _SPELLED.items():
            kwargs[name] = {k[len(_FINAL_PREFIX):-len(suffix)]: v for k, v in data.items()
                            if k not in names and k.startswith(_FINAL_PREFIX) and k.endswith(suffix)}
        return cls(**kwargs)
