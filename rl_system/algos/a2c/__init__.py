"""A2C (``algo: a2c``), synchronous advantage actor-critic as Stable-Baselines3 ships it: every
round's rollout makes one gradient step on the whole batch, with n-step returns (GAE with
``gae_lambda`` 1 by default), RMSprop, no clipping of the policy ratio and no epochs. The policy and
the worker's sampler are PPO's (the ``model:`` section's actor-critic); what is A2C's own is its
settings and its update.

* :mod:`.config` -- its settings (the ``a2c:`` section);
* :mod:`.trainer` -- :class:`A2C`, learner side, on the shared update core;
* :mod:`.factory` -- the three factories of an :class:`~rl_system.algos.protocols.AlgorithmModule`;
* :mod:`.spec` -- its registry entry.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"A2C": "trainer", "make_policy": "factory", "make_sampler": "factory", "make_trainer": "factory",
            "POLICY_SECTION": "factory"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
