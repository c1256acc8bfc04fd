"""One Tune trial: a whole run (its own workers, learner(s) and checkpointer, in the bundles of
the trial's placement group) that reports every round to Tune.

* **Reports.** After every round: ``return`` (the window's mean episode return; ``-inf`` until
  an episode has finished), each ``<outcome>_rate``, ``best_return``, ``env_steps`` (the
  schedulers' clock), ``rounds``, ``policy_version``, ``steps_per_s``, ``reseeds``.
* **Checkpoints** go through the run's own checkpoint store, as in any run; a round that was
  checkpointed waits for the file and hands a copy of it to Tune with that round's report. Under
  PBT a trial also checkpoints on its first round and every ``checkpoint_every_steps`` env steps
  (the perturbation interval), and PBT's clock is :data:`CHECKPOINT_CLOCK`, so the report that
  PBT checks always carries the checkpoint it exploits.
* **Starting from a checkpoint** (PBT's exploit, or a sweep resumed after Ctrl-C or a crash):
  Tune hands back a checkpoint; the trial loads it as ``--resume`` does (weights, optimiser,
  normalisers, counters, the return window) and goes on with its own, possibly perturbed, config.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ray import tune

from rl_system.checkpoint import keys, load_checkpoint
from rl_system.tuning.space import trial_config

TRAINABLE = "rl_system"  # the name trials carry: rl_system_<id>_<index>
# PBT's clock: the env steps of the trial's newest Tune checkpoint. It moves only in reports that
# carry a checkpoint, so PBT (which checks a trial on the first report its clock has moved
# --perturbation-steps past the last check) always finds the checkpoint it exploits in the report
# it checks, whatever its own state: fresh, restored by --resume (reset to zero), or a clone's.
CHECKPOINT_CLOCK = "checkpoint_env_steps"


def trial_metrics(ctx: Any, metric: str) -> dict[str, Any]:
    """What a trial reports after a round (``metric`` is always among the keys)."""
    st, window = ctx.stats, ctx.window
    out: dict[str, Any] = {
        "return": window.mean if window.returns else -math.inf,
        "best_return": st.best_return,
        **window.outcome_scalars,
        "env_steps": st.env_steps, "rounds": st.rounds, "policy_version": ctx.version,
        "reseeds": len(st.reseeds), "dropped_rollouts": ctx.gate.dropped,
    }
    out.setdefault(metric, -math.inf)  # an outcome no episode has reported yet
    return out


class TuneReporter:
    """The run loop's :class:`rl_system.run.loop.RoundReporter` inside a Tune trial."""

    def __init__(self, metric: str, checkpoint_every_steps: int | None, start_steps: int = 0):
        """``start_steps``: the env steps of the checkpoint the trial starts from (0: none);
        ``steps_per_s`` counts this process's steps over its time, start-up included."""
        self.metric = metric
        self.every = checkpoint_every_steps
        self._last_path: str | None = None
        self._start = (time.perf_counter(), start_steps)
        self._first_round = True
        self.checkpoint_steps = start_steps  # env steps of the newest checkpoint handed to Tune
        self.stop_requested = False

    def checkpoint_due(self, steps_before: int, steps_now: int) -> bool:
        """Under PBT: this process's first round (a restarted trial's first report may be where
        PBT checks it), then every ``every`` env steps since the last checkpoint."""
        if not self.every:
            return False
        return self._first_round or steps_now - self.checkpoint_steps >= self.every

    def after_round(self, ctx: Any, checkpointed: bool, last: bool = False) -> None:
        if self.stop_requested:
            return
        now, steps = time.perf_counter(), ctx.stats.env_steps
        self._first_round = False
        checkpoint = self._take_checkpoint(ctx) if checkpointed else None
        if checkpoint is not None:
            self.checkpoint_steps = steps
        metrics = trial_metrics(ctx, self.metric)
        metrics[CHECKPOINT_CLOCK] = self.checkpoint_steps
        metrics["steps_per_s"] = (steps - self._start[1]) / max(now - self._start[0], 1e-9)
        if last:
            # Tune's "done": the trial is over, so no scheduler acts on this report (PBT would
            # otherwise exploit at a perturbation point that is the budget's end).
            metrics["done"] = True
        try:
            tune.report(metrics, checkpoint=checkpoint)
        except SystemExit:
            # The scheduler stopped the trial (ASHA's cut, PBT's exploit): Tune ends the report
            # with SystemExit. End the run the ordinary way instead (its summary says
            # "stopped"), as far as the trial's process lives on.
            self.stop_requested = True
        finally:
            if checkpoint is not None:  # report() has copied it into the trial's storage
                shutil.rmtree(checkpoint.path, ignore_errors=True)

    def _take_checkpoint(self, ctx: Any) -> tune.Checkpoint | None:
        """Wait for the round's checkpoint file and hand Tune a copy in a staging directory
        (Tune copies it into the trial's storage; the run's store keeps its own)."""
        ctx.storage.flush(ctx.learner.lead)
        path = ctx.storage.checkpoint_stats.get("last_path")
        if not path or path == self._last_path:
            return None  # the save failed (the run's log says why): report without one
        self._last_path = path
        staging = Path(tempfile.mkdtemp(prefix="rl_system_ckpt_"))
        shutil.copy2(path, staging / Path(path).name)
        return tune.Checkpoint.from_directory(str(staging))


def _load_tune_checkpoint(checkpoint: tune.Checkpoint) -> dict[str, Any]:
    with checkpoint.as_directory() as d:
        files = sorted(Path(d).glob("*.rlck"))
        if not files:
            raise FileNotFoundError(f"no .rlck checkpoint in the Tune checkpoint {checkpoint.path}")
        state, _ = load_checkpoint(str(files[-1]))
    return state


def run_trial(params: dict[str, Any], base: dict[str, Any], metric: str,
              checkpoint_every_steps: int | None) -> None:
    """The trainable: ``params`` are the searched keys (dotted) of this trial, ``base`` the
    sweep's config tree."""
    from rl_system.run.loop import RunLoop  # imports the run's actors: only inside a trial

    ctx = tune.get_context()
    cfg = trial_config(base, params)
    run_dir = Path(ctx.get_trial_dir()) / ctx.get_trial_name()
    resume_state = None
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        resume_state = _load_tune_checkpoint(checkpoint)
        # From here on the trial's past is that checkpoint (PBT may have handed it another
        # trial's): the run's older checkpoints must not be what a rebuilt learner reloads.
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    start_steps = resume_state[keys.DRIVER][keys.ENV_STEPS] if resume_state else 0
    reporter = TuneReporter(metric, checkpoint_every_steps, start_steps)
    RunLoop(cfg, run_dir, log_level="warning", resume_state=resume_state, reporter=reporter,
            namespace=f"rl_system-{ctx.get_trial_id()}").run()
