"""Where progress goes: the names of the metrics that more than one module reads, the return
window read off finished episodes, and the sinks (console lines, TensorBoard scalars, and
:func:`read_scalars` to read them back). What is reported each round is :mod:`rl_system.run.reporting`."""

from __future__ import annotations

import math
import struct
import time
from collections import deque
from pathlib import Path
from typing import Any

from rich.console import Console

from rl_system.errors import one_line

# -- metric names -----------------------------------------------------------------------------
# A TensorBoard tag is a group and a name (``rollout/return_mean``); the live status
# (rl_system.run.reporting.status, exported by rl_system.observe.telemetry) uses the names alone.
ROLLOUT, TRAIN, SYSTEM = "rollout/", "train/", "system/"
"""The TensorBoard groups: what the policy achieves, the trainer's metrics, throughput and health."""

# Each round (rollout/ or system/) and the live status.
RETURN_MEAN = "return_mean"
STEPS_PER_S = "steps_per_s"
POLICY_VERSION = "policy_version"
POLICY_LAG_MEAN = "policy_lag_mean"
WORKER_RESTARTS = "worker_restarts"
LEARNER_RESTARTS = "learner_restarts"
CHECKPOINTER_RESTARTS = "checkpointer_restarts"
ARCHIVER_RESTARTS = "archiver_restarts"
RESEEDS = "reseeds"
ROLLBACKS = "rollbacks"

# The live status only.
RUN_STATE = "state"
ROUND = "round"
ENV_STEPS = "env_steps"
WORKERS_ALIVE = "workers_alive"
NUM_WORKERS = "num_workers"
ROLLOUTS_DROPPED = "rollouts_dropped"
BYTES_SHIPPED = "bytes_shipped"
COMPRESSION_RATIO = "compression_ratio"
CHECKPOINT_SAVE_S = "checkpoint_save_s"

# The learner's figures of one update (system/; merged over a learner group by
# rl_system.actors.learner_group.merged_metrics).
LEARNER_ENV_STEPS = "learner_env_steps"
LEARNER_DROPPED = "learner_dropped"
DECODE_S = "decode_s"
UPDATE_S = "update_s"
SKIPPED_UPDATES_TOTAL = "skipped_updates_total"
CHECKPOINT_BLOCKED_S = "checkpoint_blocked_s"
CPU_S = "cpu_s"
BF16 = "bf16"



class ReturnWindow:
    """Mean of the last ``size`` completed episode returns (the usual "100-episode mean"), and
    over the same window the rate of each boolean episode outcome the env reports (success,
    win...) and the mean of each of its numeric episode stats (``soups_served``)."""

    def __init__(self, size: int = 100):
        self.size = size
        self.returns: deque[float] = deque(maxlen=size)
        self.lengths: deque[int] = deque(maxlen=size)
        self.outcomes: dict[str, deque[bool] | deque[float]] = {}
        self.episodes = 0

    def extend(self, returns: list[float], lengths: list[int], total_episodes: int,
               outcomes: dict[str, list[bool] | list[float]] | None = None) -> None:
        self.returns.extend(returns)
        self.lengths.extend(lengths)
        self.episodes += total_episodes
        for key, values in (outcomes or {}).items():
            self.outcomes.setdefault(key, deque(maxlen=self.size)).extend(values)

    def clear(self) -> None:
        """Forget the window's episodes (a reseed on stall); the run's episode count stays."""
        self.returns.clear()
        self.lengths.clear()
        self.outcomes.clear()

    @property
    def rates(self) -> dict[str, float]:
        """``{"success": 0.83, ...}``: the rate of each boolean outcome over the window."""
        return {k: sum(v) / len(v) for k, v in self.outcomes.items() if v and isinstance(v[0], bool)}

    @property
    def means(self) -> dict[str, float]:
        """``{"soups_served": 2.4, ...}``: the mean of each numeric episode stat over the window."""
        return {k: sum(v) / len(v) for k, v in self.outcomes.items() if v and not isinstance(v[0], bool)}

    @property
    def outcome_scalars(self) -> dict[str, float]:
        """The rates and means as logged: ``{"success_rate": 0.83, "soups_served_mean": 2.4}``."""
        return {**{f"{k}_rate": v for k, v in self.rates.items()}, **{f"{k}_mean": v for k, v in self.means.items()}}

    @property
    def full(self) -> bool:
        return len(self.returns) == self.returns.maxlen

    @property
    def mean(self) -> float:
        return sum(self.returns) / len(self.returns) if self.returns else math.nan

    @property
    def mean_length(self) -> float:
        return sum(self.lengths) / len(self.lengths) if self.lengths else math.nan


LEVELS = ("debug", "info", "warning", "error")
"""Console levels, most verbose first (``rl-system train --log-level``)."""


def console_level(log_level: str, quiet: bool) -> str:
    """The console's level for a ``--log-level`` and a ``--quiet`` (no progress lines: ``warning``),
    decided once where a person said them."""
    return "warning" if quiet else log_level


class RunLogger:
    """The run's console and its log file, plus TensorBoard.

    Every line goes to ``<run dir>/console.log`` (appended, so a resumed run continues it), with
    the full text of anything the console shows as one line (``detail``: tracebacks, forwarded
    errors); the console shows the lines at or above ``level``: ``debug`` (everything, details
    too), ``info`` (progress, the default), ``warning`` (only what went wrong or was recovered),
    ``error``. ``trackers`` (:mod:`rl_system.observe.trackers`) get every scalar TensorBoard gets."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, level: str = "info", trackers: list | None = None):
        if level not in LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
        self.run_dir = run_dir
        self.threshold = LEVELS.index(level)
        self.console = Console(stderr=False, highlight=False)
        self._file = open(run_dir / "console.log", "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.file = Console(file=self._file, no_color=True, highlight=False, width=200, soft_wrap=True)
        self.writer = None
        self.trackers = list(trackers or [])
        self._held: list[tuple[int, dict[str, float]]] = []  # scalars(..., hold=True) not yet written
        if tensorboard:
            from tensorboardX import SummaryWriter

            # Appending to the same directory keeps the curves of a resumed run continuous.
            self.writer = SummaryWriter(str(run_dir / "tb"), flush_secs=5)

    def scalars(self, step: int, metrics: dict[str, Any], prefix: str = "", hold: bool = False) -> None:
        """Write ``metrics`` (the numbers among them) at ``step``. ``hold``: keep them, as they are
        now, for :meth:`write_held`; a later write without ``hold`` writes what is held first, so
        the sinks see every scalar in the order it was logged."""
        if self.writer is None and not self.trackers:
            return
        kept = {f"{prefix}{key}": float(value) for key, value in metrics.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)}
        if hold:
            self._held.append((step, kept))
            return
        self.write_held()
        self._write(step, kept)

    def write_held(self) -> None:
        """Write the scalars held by ``scalars(..., hold=True)``. The run loop calls this while the
        learner updates: a round's ~40 TensorBoard and tracker writes (~1.5 ms) then run on a core
        the update leaves idle, not between the update and the next round's sampling."""
        held, self._held = self._held, []
        for step, kept in held:
            self._write(step, kept)

    def _write(self, step: int, kept: dict[str, float]) -> None:
        if self.writer is not None:
            for tag, value in kept.items():
                self.writer.add_scalar(tag, value, step)
        for tracker in self.trackers:
            tracker.log(step, kept)

    def line(self, text: str, level: str = "info") -> None:
        """One line (rich markup allowed) to the log file, and to the console at ``level``."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.file.print(f"{stamp} {level.upper():7} {text}")
        self._file.flush()
        if LEVELS.index(level) >= self.threshold:
            self.console.print(text, soft_wrap=True)  # a log line stays one line in a file

    def warn(self, text: str) -> None:
        self.line(f"[yellow]{text}[/yellow]", "warning")

    def error(self, text: str) -> None:
        self.line(f"[red]{text}[/red]", "error")

    def detail(self, text: str) -> None:
        """Full text behind a one-line message (a traceback, an actor's error): the log file,
        and the console only at ``debug``."""
        self.file.print(text, markup=False)
        self._file.flush()
        if self.threshold == 0:
            self.console.print(text, markup=False, soft_wrap=True)

    def progress(self, rnd: int, steps: int, sps: float, window: ReturnWindow, best: float,
                 version: int, dropped: int) -> None:
        self.line(
            f"round {rnd:>5} | steps {steps:>11,} | {sps:>10,.0f} steps/s | "
            f"return {window.mean:8.2f} (best {best:8.2f}, {window.episodes:,} eps) | "
            + "".join(f"{k} {v:.2f} | " for k, v in (window.rates | window.means).items())
            + f"v{version} | dropped {dropped}")

    def close(self, status: str = "completed") -> None:
        """Flush and close TensorBoard and the trackers (``status``: the run's, for the trackers'
        FINISHED / FAILED mark) and the log file."""
        self.write_held()
        if self.writer is not None:
            self.writer.close()
        for tracker in self.trackers:
            try:
                tracker.close(status)
            except Exception as err:  # noqa: BLE001 - a tracker's upload must not fail a finished run
                self.warn(f"tracker {type(tracker).__name__} did not close cleanly: {one_line(err, with_type=True)}")
        self._file.close()


def _events(tb_dir: str | Path):
    """The Event protobufs of a run's TensorBoard directory, file by file in the order written.
    Reads the TFRecord framing directly (u64 length, u32 CRC, the Event protobuf, u32 CRC); a
    record still being written (a live run's) ends the file."""
    from tensorboardX.proto import event_pb2

    for path in sorted(Path(tb_dir).glob("events.out.tfevents*")):
        data, i = path.read_bytes(), 0
        while i + 12 <= len(data):
            (n,) = struct.unpack_from("<Q", data, i)
            if i + 12 + n + 4 > len(data):
                break
            yield event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 12 + n + 4


def read_scalars(tb_dir: str | Path, prefix: str = "") -> dict[str, list[tuple[int, float]]]:
    """Every scalar whose tag starts with ``prefix`` in a run's TensorBoard directory, as
    ``{tag: [(step, value), ...]}`` in the order written: a run's curves without TensorBoard."""
    out: dict[str, list[tuple[int, float]]] = {}
    for event in _events(tb_dir):
        for v in event.summary.value:
            if v.tag.startswith(prefix):
                out.setdefault(v.tag, []).append((event.step, v.simple_value))
    return out


def first_at_least(tb_dir: str | Path, tag: str, threshold: float) -> tuple[int, float] | None:
    """``(step, seconds)`` of the first ``tag`` value >= ``threshold``, the seconds counted from
    the event file's opening (the run's start, before its actors); None if it never got there."""
    t0 = None
    for event in _events(tb_dir):
        t0 = event.wall_time if t0 is None else t0
        for v in event.summary.value:
            if v.tag == tag and v.simple_value >= threshold:
                return event.step, event.wall_time - t0
    return None
