"""The run's storage side: the checkpointer and rollout-archiver actors, seen from the driver.

Both write off the training path. The driver asks, and this class keeps the books: checkpoint
stats (saved / skipped / failed / last error), archive writes in flight, written and skipped.
Each actor runs where its storage is: on the driver's node for a local path, anywhere for a
filesystem URI (``s3://``, ``gs://``, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rl_system.archive import RolloutArchiver
from rl_system.checkpoint.writer import Checkpointer
from rl_system.config import RunConfig
from rl_system.errors import one_line
from rl_system.filesystems import is_remote


def storage_placement(root: str) -> Any:
    """Where an actor writing under ``root`` must run: a local path lives on this (the driver's)
    node; a filesystem URI is reachable from any node."""
    if is_remote(root):
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)


class RunStorage:
    # At most this many archive writes in flight; beyond it a round's archive is skipped (and
    # counted) rather than queueing without bound behind a slow filesystem.
    MAX_ARCHIVE_WRITES = 4

    def __init__(self, cfg: RunConfig, run_dir: Path, say: Callable[[str], None]):
        self.say = say
        ckpt_root = cfg.checkpoint.dir or str((run_dir / "checkpoints").resolve())
        self.checkpointer = ray.remote(Checkpointer).options(
            name="checkpointer", num_cpus=0, max_concurrency=4, max_restarts=0,
            scheduling_strategy=storage_placement(ckpt_root),
        ).remote(ckpt_root, keep_last=cfg.checkpoint.keep_last)
        self.archiver = None
        if cfg.archive_every:
            root = cfg.archive_dir or str((run_dir / "rollouts").resolve())
            self.archiver = ray.remote(RolloutArchiver).options(
                name="rollout-archiver", num_cpus=0, scheduling_strategy=storage_placement(root)).remote(root)
        self.checkpoint_stats: dict[str, Any] = {}
        self.checkpoints_requested = 0
        self.archives_written = self.archives_skipped = 0
        self._archive_refs: list[ray.ObjectRef] = []

    # -- checkpoints -------------------------------------------------------------------------
    def request_checkpoint(self, learner: Any, extra: dict[str, Any], manifest: dict[str, Any]) -> None:
        """The learner snapshots itself to the checkpointer; neither call waits for disk."""
        learner.save_checkpoint.remote(self.checkpointer, extra, manifest)
        self.checkpoints_requested += 1

    def poll(self) -> dict[str, Any] | None:
        """Refresh checkpoint stats; says so when saves failed since the last poll."""
        try:
            stats = ray.get(self.checkpointer.stats.remote(), timeout=5)
        except Exception:  # noqa: BLE001 - monitoring only
            return None
        failed_before = self.checkpoint_stats.get("failed", 0)
        self.checkpoint_stats = stats
        if stats["failed"] > failed_before:
            self.say(f"[red]checkpoint save failed ({stats['failed']} so far): {stats['last_error']}; "
                     f"training goes on, earlier checkpoints are untouched[/red]")
        return stats

    def flush(self, learner: Any | None, timeout: float = 120.0) -> None:
        """Wait until every requested checkpoint is on storage (end of run, Ctrl-C, SIGTERM)."""
        try:
            if learner is not None:
                err = ray.get(learner.flush_snapshot.remote(), timeout=timeout)
                if err:
                    self.say(f"[red]checkpoint snapshot failed: {err}[/red]")
            self.checkpoint_stats = ray.get(self.checkpointer.flush.remote(timeout), timeout=timeout + 5)
        except Exception as err:  # noqa: BLE001 - the run is ending; say what happened
            self.say(f"[red]could not flush checkpoints: {one_line(err)}[/red]")
            return
        if self.checkpoint_stats.get("last_error"):
            self.say(f"[red]checkpoint error: {self.checkpoint_stats['last_error']}[/red]")

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
                ray.get(ref)
                self.archives_written += 1
            except Exception as err:  # noqa: BLE001 - reported, training goes on
                self.say(f"[yellow]rollout archive write failed: {one_line(err)}[/yellow]")

    def stop(self) -> None:
        for actor in (self.archiver, self.checkpointer):
            if actor is not None:
                ray.kill(actor, no_restart=True)
        self.archiver = self.checkpointer = None
