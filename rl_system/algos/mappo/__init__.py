"""Multi-agent PPO (``algo: mappo``, settings in the ``mappo:`` section): MAPPO, a critic on the
global state, or IPPO, a critic on each agent's own observation (``mappo.critic``), for the
multi-agent envs of :mod:`rl_system.envs.base` (VMAS, PettingZoo, MPE, AliceBob, your own) with
discrete, multi-discrete or continuous actions per agent. See ``docs/multi_agent.md``.

* :mod:`.config` -- its settings; :mod:`.columns` -- its rollout columns;
* :mod:`.networks` -- :class:`MultiAgentActorCritic`, shared or per-agent parameters, with an
  optional GRU/LSTM core (``mappo.recurrent``);
* :mod:`.one_agent` -- one agent's policy cut out of it, for exporting it alone;
* :mod:`.sampler` -- worker side; :mod:`.trainer` -- learner side (per-agent GAE and the clipped
  loss on the shared update core).
"""

from __future__ import annotations

from rl_system.algos.mappo.config import MAPPOConfig

__all__ = ["POLICY_SECTION", "MAPPOConfig", "make_policy", "make_sampler", "make_trainer"]

POLICY_SECTION = "mappo"
"""The networks are built from the algorithm's own section."""


def make_policy(obs_spec, action_spec, mappo: MAPPOConfig):
    """A :class:`~rl_system.algos.mappo.networks.MultiAgentActorCritic` (with ``mappo.recurrent``, its
    recurrent kind), or where the agents fall into several groups (:mod:`.groups`) a
    :class:`~rl_system.algos.mappo.grouped.GroupedActorCritic` of one per group; the env must be
    multi-agent (observations ``state`` and ``obs``, one action per agent)."""
    from rl_system.algos.mappo.grouped import GroupedActorCritic, RecurrentGroupedActorCritic
    from rl_system.algos.mappo.groups import make_groups
    from rl_system.algos.mappo.networks import MultiAgentActorCritic, RecurrentMultiAgentActorCritic
    from rl_system.envs.base import AGENT_OBS, STATE, AgentBox, is_multi_agent

    if not is_multi_agent(action_spec) or STATE not in obs_spec or AGENT_OBS not in obs_spec:
        raise ValueError("algo mappo needs a multi-agent env: observations 'state' and 'obs' and one action per "
                         f"agent (got {sorted(obs_spec)} and {action_spec}); algo ppo trains single-agent envs")
    groups = make_groups(obs_spec, action_spec, mappo.groups)
    for group in groups:
        if isinstance(group.action, AgentBox) and len(group.action.agent_shape) != 1:
            raise ValueError(f"algo mappo takes continuous actions of one dimension per agent, got {group.action} "
                             f"(group {group.name!r})")
    recurrent = mappo.recurrent != "none"
    network = RecurrentMultiAgentActorCritic if recurrent else MultiAgentActorCritic
    if len(groups) == 1:  # agents all alike: the one network
        return network(obs_spec, action_spec, mappo)
    grouped = RecurrentGroupedActorCritic if recurrent else GroupedActorCritic
    return grouped(obs_spec, action_spec, groups, mappo, network)


def make_sampler(env, policy, mappo: MAPPOConfig, rollout_len: int, device):
    from rl_system.algos.mappo.sampler import MultiAgentSampler

    return MultiAgentSampler(env, policy, rollout_len, device, reward=mappo.reward)


def make_trainer(policy, mappo: MAPPOConfig, learner=None, group=None):
    """The trainer; ``learner`` (the ``learner:`` section) sets nothing of this update."""
    from rl_system import collective
    from rl_system.algos.mappo.trainer import MAPPO

    return MAPPO(policy, mappo, group or collective.SOLO)
