"""PPO (``algo: ppo``), one package read top to bottom:

* :mod:`.policy` -- :class:`ActorCritic`, the weights shipped per policy version;
* :mod:`.buffer` -- :class:`RolloutBuffer`, the preallocated ``[T, N, ...]`` columns;
* :mod:`.sampler` -- :class:`PolicySampler`, worker side: fills the buffer from an env batch;
* :mod:`.trainer` -- :class:`PPO`, learner side: GAE and the clipped-surrogate epochs;
* :mod:`.config` -- its settings (``ppo:`` and ``model:``);
* :mod:`.factory` -- the three factories that make it an
  :class:`~rl_system.algos.protocols.AlgorithmModule`.

Names are imported on first use, so the config can read :mod:`.config` without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> submodule that defines it
_EXPORTS = {
    "ActorCritic": "policy", "RecurrentActorCritic": "policy", "PPO": "trainer", "PolicySampler": "sampler",
    "make_policy": "factory", "make_sampler": "factory", "make_trainer": "factory", "network_class": "factory",
    "POLICY_SECTION": "factory",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
