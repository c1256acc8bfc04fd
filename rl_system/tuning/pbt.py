"""Population-based training as Tune runs it, less one race of synchronous PBT.

With ``synch=True`` PBT pauses each member as it reaches a perturbation point; pausing first
saves the member. When the last member's report arrives while an earlier member's save is
still in flight, PBT exploits that earlier member at once, and Tune (2.60; ray-project/ray
issue #57906) then caches a *STOP* for it: stopping a trial that is saving defers the stop
until the save resolves. Pausing tears the actor down and drops the save, so the STOP stays
cached. When the member restarts from its donor's checkpoint, its first checkpointed report
pops that STOP and Tune terminates it below the next synch point. The other members then wait
paused at that point for a report that never comes, and the sweep hangs.

:class:`PopulationBasedTraining` drops the decision the exploit left behind. A member that PBT
has just paused has no actor, so no later decision cached for the old actor can apply to it.
"""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining as TunePBT


class PopulationBasedTraining(TunePBT):
    """Tune's PBT; an exploited member that ends up paused keeps no stale cached decision."""

    def _exploit(self, tune_controller: Any, trial: Trial, trial_to_clone: Trial) -> None:
        super()._exploit(tune_controller, trial, trial_to_clone)
        cached = getattr(tune_controller, "_cached_trial_decisions", None)
        if trial.status == Trial.PAUSED and cached is not None:
            cached.pop(trial.trial_id, None)
