"""HMASD (Yang et al., "Hierarchical Multi-Agent Skill Discovery", NeurIPS 2023) as a selectable
algorithm (``algo: hmasd``, hyperparameters in the ``hmasd:`` config section), and flat recurrent
MAPPO with the same code (``hmasd.hierarchy: false``). See ``docs/hmasd.md``.

* :mod:`.config` -- its settings (the ``hmasd:`` section); :mod:`.columns` -- its rollout columns.
* :mod:`.networks` -- skill coordinator (transformer), skill discoverer (GRU actor/critic),
  discriminators, value normalisers: one :class:`HMASDPolicy` module.
* :mod:`.sampler` -- worker side: both levels stepping a multi-agent env batch.
* :mod:`.trainer` -- learner side, one update per round: :mod:`.returns` (intrinsic rewards, GAE
  per level), :mod:`.minibatch` (chunks and windows), :mod:`.losses`, :mod:`.trust` (the
  coordinator's KL bound), :mod:`.novelty`, :mod:`.metrics`.
"""

from __future__ import annotations

# Networks, sampler and trainer are imported when first needed (importing the package stays cheap).
from rl_system.algos.hmasd.config import HMASDConfig

__all__ = ["POLICY_SECTION", "HMASDConfig", "make_policy", "make_sampler", "make_trainer"]


POLICY_SECTION = "hmasd"
"""HMASD's networks are built from its own section."""


def make_policy(obs_spec, action_spec, hmasd: HMASDConfig):
    """An :class:`~rl_system.algos.hmasd.networks.HMASDPolicy`. The env must be multi-agent:
    observations ``"state" [S]`` and ``"obs" [n, O]``, :class:`AgentDiscrete` actions."""
    from rl_system.algos.hmasd.networks import HMASDPolicy
    from rl_system.envs.base import AgentDiscrete, AgentMixed

    if isinstance(action_spec, AgentMixed):
        raise ValueError(f"algo hmasd takes agents of one action kind and shape; this env's differ ({action_spec}): "
                         "algo mappo trains them as agent groups")
    if not isinstance(action_spec, AgentDiscrete) or "state" not in obs_spec or "obs" not in obs_spec:
        raise ValueError("algo hmasd needs a multi-agent env: observations 'state' and 'obs', AgentDiscrete actions "
                         f"(got {sorted(obs_spec)} and {type(action_spec).__name__})")
    n, O = obs_spec["obs"].shape
    return HMASDPolicy(obs_spec["state"].shape[0], O, n, action_spec.n, hmasd)


def make_sampler(env, policy, hmasd: HMASDConfig, rollout_len: int, device):
    from rl_system.algos.hmasd.sampler import HMASDSampler

    return HMASDSampler(env, policy, hmasd, rollout_len, device)


def make_trainer(policy, hmasd: HMASDConfig, learner=None, group=None):
    """The trainer; ``learner`` (the ``learner:`` section) sets nothing of HMASD's update yet."""
    from rl_system import collective
    from rl_system.algos.hmasd.trainer import HMASDTrainer

    return HMASDTrainer(policy, hmasd, group or collective.SOLO)
