"""Learning algorithms, selected by ``algo:`` in the run config.

An algorithm has two halves that meet only through the rollout columns and the weights:

* worker side, a :class:`rl_system.sampler.Sampler`: steps the env batch with a copy of the
  policy and fills one rollout's columns;
* learner side, a *trainer*: ``update(batch, progress) -> metrics`` on one round's batch, plus
  ``state_dict()`` / ``load_state_dict()`` of its optimiser state and a ``skipped_updates``
  counter (minibatches dropped for non-finite losses or gradients).

``make_policy`` builds the ``nn.Module`` holding every network (and normaliser buffer) whose
``state_dict`` the workers receive as "the weights" of a policy version.

Column convention (what the codec ships and :func:`rl_system.learner.concat_rollouts` joins):
time-major ``[T, N, ...]``, except names starting with ``last_`` or ``init_`` (env-major
``[N, ...]``), ``final_`` (one row per episode that ended in the rollout, env-major order) and
``episode_`` (per completed episode, ``[E]``; statistics, not training data).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from rl_system.config import RunConfig

ENV_MAJOR = ("last_", "init_", "final_")
"""Prefixes of columns that are not time-major (see above)."""
STATS = "episode_"
"""Prefix of the per-episode statistics columns."""

# algo name -> module providing make_policy / make_sampler / make_trainer (imported lazily).
_ALGORITHMS = {
    "ppo": "rl_system.algos.ppo_algo",
    "hmasd": "rl_system.algos.hmasd",
}


@dataclass(frozen=True)
class Algorithm:
    name: str
    module: Any

    def make_policy(self, obs_spec, action_spec, cfg):
        return self.module.make_policy(obs_spec, action_spec, cfg)

    def make_sampler(self, env, policy, cfg, device):
        return self.module.make_sampler(env, policy, cfg, device)

    def make_trainer(self, policy, cfg):
        return self.module.make_trainer(policy, cfg)


def get_algorithm(name: str) -> Algorithm:
    if name not in _ALGORITHMS:
        raise KeyError(f"unknown algo {name!r}; known: {', '.join(sorted(_ALGORITHMS))}")
    return Algorithm(name, importlib.import_module(_ALGORITHMS[name]))


def load_policy(state: dict[str, Any], env: Any, device: str = "cpu") -> Any:
    """A checkpoint's policy network for ``env``'s spaces: built by the checkpoint's algorithm
    from its config, its weights loaded, in eval mode (for eval, rendering, opponents)."""
    cfg = RunConfig.model_validate(state["config"])
    policy = get_algorithm(cfg.algo).make_policy(env.observation_spec, env.action_spec, cfg).to(device)
    try:
        policy.load_state_dict(state["learner"]["model"])
    except RuntimeError as err:  # the env's spaces differ from the ones the policy was trained on
        lines = str(err).splitlines()  # torch: a header line, then one line per mismatched tensor
        detail = lines[1].strip() if len(lines) > 1 else str(err)
        raise ValueError(f"the checkpoint's weights do not fit env {cfg.env.name!r} with kwargs {cfg.env.kwargs}: "
                         f"{detail}") from None
    return policy.eval()
