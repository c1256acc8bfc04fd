"""The run's storage side: the checkpointer and rollout-archiver actors, seen from the driver.

Both write off the training path. The driver asks, and this class keeps the books: checkpoint
stats (saved / skipped / failed / last error), archive writes in flight, written and skipped.
Each actor runs where its storage is: on the driver's node for a local path, anywhere for a
filesystem URI (``s3://``, ``gs://``, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rl_system.actors.placement import ActorScope
from rl_system.checkpoint import CheckpointError, CheckpointStore
from rl_system.checkpoint.writer import Checkpointer
from rl_system.config import RunConfig
from rl_system.errors import one_line
from rl_system.filesystems import is_remote
from rl_system.observe.metrics import RunLogger
from rl_system.rollout.archive import RolloutArchiver


def storage_placement(root: str) -> Any:
    """Where an actor writing under ``root`` must run: a local path lives on this (the driver's)
    node; a filesystem URI is reachable from any node."""
    if is_remote(root):
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)


def checkpoint_root(cfg: RunConfig, run_dir: Path) -> str:
    """Where a run's checkpoints go: ``checkpoint.dir`` (a path or a filesystem URI), else
    ``<run dir>/checkpoints``."""
    return cfg.checkpoint.dir or str((run_dir / "checkpoints").resolve())


class RunStorage:
    # At most this many archive writes in flight; beyond it a round's archive is skipped (and
    # counted) rather than queueing without bound behind a slow filesystem.
    MAX_ARCHIVE_WRITES = 4
    _COUNTS = ("saved", "skipped", "failed")

    def __init__(self, cfg: RunConfig, run_dir: Path, log: RunLogger, scope: ActorScope | None = None):
        self.log = log
        scope = scope or ActorScope()
        self.ckpt_root = checkpoint_root(cfg, run_dir)
        # Ray restarts a dead checkpointer or archiver, and retries the calls it was running on the
        # new process (max_task_retries=-1): a save whose state is still in the object store is
        # written after all, and what was written before stays (every write is atomic).
        restarts = {"max_restarts": cfg.checkpoint.max_restarts, "max_task_retries": -1}
        self.checkpointer = ray.remote(Checkpointer).options(
            **scope.named("checkpointer"), num_cpus=0, max_concurrency=4, **restarts,
            scheduling_strategy=storage_placement(self.ckpt_root),
        ).remote(self.ckpt_root, keep_last=cfg.checkpoint.keep_last)
        self.archiver = None
        if cfg.archive_every:
            root = cfg.archive_dir or str((run_dir / "rollouts").resolve())
            self.archiver = ray.remote(RolloutArchiver).options(
                **scope.named("rollout-archiver"), num_cpus=0, scheduling_strategy=storage_placement(root), **restarts,
            ).remote(root)
        self.checkpoint_stats: dict[str, Any] = {}
        self.checkpoints_requested = 0
        self.archives_written = self.archives_skipped = 0
        self.checkpointer_restarts = self.archiver_restarts = 0
        self._archive_refs: list[ray.ObjectRef] = []
        self._pids: dict[str, int] = {}  # actor -> the process it last answered from
        self._before_restart = dict.fromkeys(self._COUNTS, 0)  # counts of earlier checkpointer processes
        self._last_raw: dict[str, Any] = {}

    def _restarted(self, actor: str, pid: int | None) -> bool:
        """True when ``actor`` answers from another process than last time (Ray restarted it)."""
        before = self._pids.get(actor)
        if pid is not None:
            self._pids[actor] = pid
        return before is not None and pid is not None and pid != before

    def _take_stats(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The checkpointer's stats made run-wide: a restarted checkpointer counts from zero."""
        if self._restarted("checkpointer", raw.get("pid")):
            self.checkpointer_restarts += 1
            for k in self._COUNTS:
                self._before_restart[k] += self._last_raw.get(k, 0)
            self.log.warn(f"the checkpointer was restarted (restart {self.checkpointer_restarts}); "
                          f"saves go on, the checkpoints it had written are untouched")
        self._last_raw = raw
        self.checkpoint_stats = {**raw, **{k: raw[k] + self._before_restart[k] for k in self._COUNTS}}
        return self.checkpoint_stats

    # -- checkpoints -------------------------------------------------------------------------
    def start_refs(self) -> dict[ray.ObjectRef, str]:
        """A ping of the checkpointer, waited on with the other actors' before round 1: saves sent
        to an actor still starting queue up and may run in any order on its thread pool, and a
        save that runs after a newer one is skipped (newest wins), so a fast run would lose its
        first checkpoints to the checkpointer's start-up rather than to a slow disk."""
        return {self.checkpointer.ping.remote(): "checkpointer"}

    def request_checkpoint(self, learner: Any, extra: dict[str, Any], manifest: dict[str, Any]) -> None:
        """The learner snapshots itself to the checkpointer; neither call waits for disk."""
        learner.save_checkpoint.remote(self.checkpointer, extra, manifest)
        self.checkpoints_requested += 1

    def poll(self) -> dict[str, Any] | None:
        """Refresh checkpoint stats; says so when saves failed since the last poll."""
        try:
            raw = ray.get(self.checkpointer.stats.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - monitoring only
            return None
        failed_before = self.checkpoint_stats.get("failed", 0)
        stats = self._take_stats(raw)
        if stats["failed"] > failed_before:
            self.log.error(f"checkpoint save failed ({stats['failed']} so far): {stats['last_error']}; "
                           f"training goes on, earlier checkpoints are untouched")
        return stats

    def flush(self, learner: Any | None, timeout: float = 120.0) -> None:
        """Wait until every requested checkpoint is on storage (end of run, Ctrl-C, SIGTERM, a
        learner about to be rebuilt). Nothing to wait for before the first request: then the
        learner may never have started (a run that gave up waiting for its actors)."""
        if self.checkpoints_requested == 0:
            return
        try:
            if learner is not None:
                err = ray.get(learner.flush_snapshot.remote(), timeout=timeout)
                if err:
                    self.log.error(f"checkpoint snapshot failed: {err}")
            self._take_stats(ray.get(self.checkpointer.flush.remote(timeout), timeout=timeout + 5))
        except Exception as err:  # noqa: BLE001 - the run is ending; say what happened
            self.log.error(f"could not flush checkpoints: {one_line(err)}")
            return
        if self.checkpoint_stats.get("last_error"):
            self.log.error(f"checkpoint error: {self.checkpoint_stats['last_error']}")

    def newest_checkpoint(self) -> dict[str, Any] | None:
        """The newest checkpoint of this run that loads (read here, on the driver), or None."""
        try:
            state, _, path = CheckpointStore(self.ckpt_root, clean=False).load_latest_valid()
        except CheckpointError as err:
            self.log.warn(f"no checkpoint to rebuild from: {err}")
            return None
        self.log.line(f"loaded {path}")
        return state

    # -- rollout archive -----------------------------------------------------------------------
    def archive(self, round_index: int, payload_refs: list[ray.ObjectRef]) -> None:
        """Fire-and-forget write of a round's rollouts (nobody waits for it)."""
        self.collect_archive(timeout=0)
        if len(self._archive_refs) >= self.MAX_ARCHIVE_WRITES:
            self.archives_skipped += 1
            return
        self._archive_refs.append(self.archiver.write.remote(round_index, *payload_refs))

    def collect_archive(self, timeout: float) -> None:
        """Account for finished archive writes (waiting up to ``timeout`` for all of them)."""
        if not self._archive_refs:
            return
        done, self._archive_refs = ray.wait(self._archive_refs, num_returns=len(self._archive_refs),
                                            timeout=timeout)
        for ref in done:
            try:
                written = ray.get(ref)
            except Exception as err:  # noqa: BLE001 - reported, training goes on
                self.log.warn(f"rollout archive write failed: {one_line(err)}")
                continue
            self.archives_written += 1
            if self._restarted("archiver", written.get("pid")):
                self.archiver_restarts += 1
                self.log.warn(f"the rollout archiver was restarted (restart {self.archiver_restarts})")

    def stop(self) -> None:
        for actor in (self.archiver, self.checkpointer):
            if actor is not None:
                ray.kill(actor, no_restart=True)
        self.archiver = self.checkpointer = None
