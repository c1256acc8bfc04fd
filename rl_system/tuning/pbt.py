"""Population-based training as Tune runs it, less two ways synchronous PBT hangs.

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

The second: after the members meet at a synch point, Tune sets the next one to
``max(next + interval, the members' latest time)``, and resumes only members whose time is
*below* it. When the members are already past ``next + interval`` (a resumed sweep, whose fresh
scheduler counts from 0 while its members restart thousands of env steps in; or a round longer
than the interval), every member sits exactly at that point and none may run: the sweep waits
forever. The next point here is the first multiple of the interval above every member's time.
"""

from __future__ import annotations

from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining as TunePBT


class PopulationBasedTraining(TunePBT):
    """Tune's PBT; an exploited member that ends up paused keeps no stale cached decision, and
    after a synch point some member is always below the next one."""

    def _exploit(self, tune_controller: Any, trial: Trial, trial_to_clone: Trial) -> None:
        super()._exploit(tune_controller, trial, trial_to_clone)
        cached = getattr(tune_controller, "_cached_trial_decisions", None)
        if trial.status == Trial.PAUSED and cached is not None:
            cached.pop(trial.trial_id, None)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        decision = super().on_trial_result(tune_controller, trial, result)
        if self._synch:
            times = [self._trial_state[t].last_train_time for t in tune_controller.get_live_trials()
                     if t in self._trial_state]
            if times and min(times) >= self._next_perturbation_sync:  # nobody below it: nobody could run
                step = self._perturbation_interval
                self._next_perturbation_sync = (max(times) // step + 1) * step
        return decision
