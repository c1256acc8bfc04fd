"""BenchMARL's PettingZoo MPE tasks on the ``mpe2`` package.

BenchMARL 1.5.2 builds its PettingZoo tasks with TorchRL's ``PettingZooEnv(task="simple_spread_v3",
parallel=True, ...)``, which looks the task up in ``pettingzoo.mpe``; PettingZoo 1.27 moved the MPE
envs out into ``mpe2``, so that lookup fails. :class:`Mpe2Class` is BenchMARL's own
``PettingZooClass`` (the same specs, group map, state, action choice) with one method replaced:
:meth:`Mpe2Class.get_env_fun` builds ``mpe2.<task>.parallel_env(**config)`` and hands it to TorchRL's
``PettingZooWrapper`` with the arguments ``PettingZooClass.get_env_fun`` gives ``PettingZooEnv``
(``categorical_actions=True``, the device, the seed, ``return_state`` where the task has a state).
The one argument left out is ``render_mode="rgb_array"``: the peer never renders.

Imports BenchMARL and TorchRL: import this module only where they are installed. The class lives at
module level because BenchMARL pickles the task into its run folder.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from benchmarl.environments import PettingZooTask
from benchmarl.environments.pettingzoo.common import PettingZooClass
from torchrl.envs.libs.pettingzoo import PettingZooWrapper


class Mpe2Class(PettingZooClass):
    """BenchMARL's PettingZoo task whose env comes from ``mpe2`` instead of ``pettingzoo.mpe``."""

    def get_env_fun(self, num_envs: int, continuous_actions: bool, seed: int | None,
                    device: Any) -> Callable[[], PettingZooWrapper]:
        config = dict(self.config)
        module = importlib.import_module(f"mpe2.{config.pop('task')}")
        if self.supports_continuous_actions() and self.supports_discrete_actions():
            config["continuous_actions"] = continuous_actions
        state = self.has_state()
        return lambda: PettingZooWrapper(env=module.parallel_env(**config), categorical_actions=True, device=device,
                                         seed=seed, return_state=state)


def task(name: str, **overrides: Any) -> Mpe2Class:
    """BenchMARL's task ``name`` (``"simple_spread"``) with its installed yaml config
    (``benchmarl/conf/task/pettingzoo/<name>.yaml``), ``overrides`` on top, built on mpe2."""
    base = PettingZooTask[name.upper()].get_from_yaml()
    return Mpe2Class(name=base.name, config={**base.config, **overrides})
