"""Policy-version gate: which rollouts a learner at version ``v`` may train on.

A rollout produced by policy version ``u`` is accepted iff ``v - max_policy_lag <= u <= v``.
With the default lag 0 training is strictly on-policy. Everything rejected is counted (the
driver logs it and re-requests the rollout); nothing is ever dropped silently.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class PolicyVersionGate:
    max_policy_lag: int = 0
    accepted: int = 0
    dropped: int = 0
    lag_histogram: Counter = field(default_factory=Counter)
    """lag -> number of accepted rollouts with that lag (reports the lag actually used)."""

    def admits(self, rollout_version: int, learner_version: int) -> bool:
        lag = learner_version - rollout_version
        return 0 <= lag <= self.max_policy_lag

    def check(self, rollout_version: int, learner_version: int) -> bool:
        """Like :meth:`admits`, and records the decision."""
        ok = self.admits(rollout_version, learner_version)
        if ok:
            self.accepted += 1
            self.lag_histogram[learner_version - rollout_version] += 1
        else:
            self.dropped += 1
        return ok

    @property
    def mean_lag(self) -> float:
        n = sum(self.lag_histogram.values())
        return sum(lag * c for lag, c in self.lag_histogram.items()) / n if n else 0.0

    @property
    def max_lag_used(self) -> int:
        return max(self.lag_histogram, default=0)
