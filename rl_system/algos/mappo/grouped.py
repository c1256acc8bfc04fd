"""Agents of different kinds: a policy per agent group (:mod:`.groups`), acting together as one
multi-agent actor-critic.

:class:`GroupedActorCritic` holds one :class:`~.networks.MultiAgentActorCritic` per group, built
for the group's own spaces (its agents' observation width, its action kind), with ``share_params``
and ``critic`` as configured, inside the group. Every call takes the env's tensors (agents in the
env's order, observations padded to the widest agent, :class:`~rl_system.envs.base.AgentMixed`
actions where kinds differ), gives each group its agents' rows cut to the group's width, and puts
the groups' outputs back in the env's agent order: the sampler, the trainer, evaluation and
checkpoints see the same interface as one network's. A central critic reads the global state in
every group (it sees every group's agents); IPPO's local critics read the group's own
observations. With ``value_norm`` the grouped network keeps one :class:`ValueNorm` over all
agents, as the one-network policy does.

Shapes: ``B`` rows (env steps; ``[T, B]`` over a recurrent sequence), ``n`` agents, ``n_g`` a
group's agents, ``O_g`` its observation width, ``D`` the widest agent's action values (mixed kinds).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from rl_system.algos.mappo.config import MAPPOConfig
from rl_system.algos.mappo.groups import AgentGroup
from rl_system.algos.mappo.networks import MultiAgentActorCritic
from rl_system.algos.value_norm import ValueNorm
from rl_system.envs.base import (
    ACTION_MASK,
    AGENT_ACTIVE,
    AGENT_OBS,
    STATE,
    AgentActionSpec,
    AgentDiscrete,
    AgentMixed,
    TensorSpec,
    from_mixed_row,
    mask_width,
    sample_actions,
)

Obs = dict[str, torch.Tensor]


class GroupedActorCritic(nn.Module):
    """One :class:`MultiAgentActorCritic` per :class:`AgentGroup` behind its ``act``/``evaluate``/
    ``value`` (module docstring); ``groups[name]`` is a group's network."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: AgentActionSpec,
                 groups: tuple[AgentGroup, ...], cfg: MAPPOConfig, network: type = MultiAgentActorCritic):
        super().__init__()
        self.spec, self.num_agents, self.agent_groups = action_spec, action_spec.num_agents, groups
        self.central = cfg.critic == "central"  # one agent's exported graph holds a value only without it
        self.mixed = isinstance(action_spec, AgentMixed)
        one = cfg.model_copy(update={"value_norm": False})  # one ValueNorm for all groups, below
        obs = obs_spec[AGENT_OBS]
        self.groups = nn.ModuleDict({
            g.name: network({STATE: obs_spec[STATE], AGENT_OBS: TensorSpec((len(g.agents), g.obs_width), obs.dtype)},
                            g.action, one) for g in groups})
        self.value_norm = ValueNorm() if cfg.value_norm else None
        for k, g in enumerate(groups):
            self.register_buffer(f"rows_{k}", torch.tensor(g.agents), persistent=False)
        order = torch.tensor([j for g in groups for j in g.agents])
        self.in_order = bool((order == torch.arange(self.num_agents)).all())  # no reordering needed
        self.register_buffer("order", order.argsort(), persistent=False)
        self.mask_widths = [mask_width(g.action) for g in groups]
        self.acting_at_random: frozenset[str] = frozenset()
        """Groups whose actions ``act`` draws uniformly instead (evaluation: a trained group against
        opponents acting at random); their values are still their critics'."""

    # -- the env's tensors to a group's, and back ------------------------------------------------
    def _rows(self, k: int) -> torch.Tensor:
        return getattr(self, f"rows_{k}")

    def view(self, obs: Obs, k: int) -> Obs:
        """Group ``k``'s observations: ``state`` as it is, its agents' ``obs [..., n_g, O_g]``,
        ``action_mask [..., n_g, width_g]`` and ``agent_active [..., n_g]``."""
        rows, group = self._rows(k), self.agent_groups[k]
        out = {STATE: obs[STATE], AGENT_OBS: obs[AGENT_OBS].index_select(-2, rows)[..., :group.obs_width]}
        mask, width = obs.get(ACTION_MASK), self.mask_widths[k]
        if mask is not None and width is not None:
            out[ACTION_MASK] = mask.index_select(-2, rows)[..., :width]
        if AGENT_ACTIVE in obs:
            out[AGENT_ACTIVE] = obs[AGENT_ACTIVE].index_select(-1, rows)
        return out

    def group_action(self, action: torch.Tensor, k: int) -> torch.Tensor:
        """Group ``k``'s agents' actions out of the env's, in the group's own kind."""
        rows = self._rows(k)
        if not self.mixed:
            return action.index_select(_agent_dim(self.spec), rows)
        return from_mixed_row(action.index_select(-2, rows), self.agent_groups[k].action)

    def env_action(self, parts: list[torch.Tensor]) -> torch.Tensor:
        """The groups' actions as the env takes them (``AgentMixed``: float rows padded to ``D``)."""
        if self.mixed:
            width = self.spec.shape[-1]
            rows = [(p.unsqueeze(-1) if isinstance(g.action, AgentDiscrete) else p).float()
                    for p, g in zip(parts, self.agent_groups)]
            return self._in_env_order(torch.cat([F.pad(r, (0, width - r.shape[-1])) for r in rows], -2), -2)
        dim = _agent_dim(self.spec)
        return self._in_env_order(torch.cat(parts, dim), dim)

    def per_agent(self, parts: list[torch.Tensor]) -> torch.Tensor:
        """``[..., n]`` from the groups' ``[..., n_g]``."""
        return self._in_env_order(torch.cat(parts, -1), -1)

    def _in_env_order(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        return x if self.in_order else x.index_select(dim, self.order)

    def _each(self) -> list[tuple[int, nn.Module]]:
        return list(enumerate(self.groups.values()))

    def _at_random(self, out: tuple[torch.Tensor, ...], obs: Obs, k: int) -> tuple[torch.Tensor, ...]:
        """A group's ``act`` output with its actions drawn uniformly where it acts at random (logp 0)."""
        group = self.agent_groups[k]
        if group.name not in self.acting_at_random:
            return out
        action, logp = out[0], out[1]
        drawn = sample_actions(group.action, action.shape[0], obs.get(ACTION_MASK))
        return (drawn.to(device=action.device, dtype=action.dtype), torch.zeros_like(logp), *out[2:])

    # -- the policy ------------------------------------------------------------------------------
    def value(self, obs: Obs) -> torch.Tensor:
        """``[B, n]``: each agent's value, from its group's critic."""
        return self.per_agent([net.value(self.view(obs, k)) for k, net in self._each()])

    def act(self, obs: Obs, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp [B, n], value [B, n])``, no grad; ``action`` as the env takes it."""
        out = [self._at_random(net.act(view, deterministic), view, k)
               for k, net in self._each() for view in (self.view(obs, k),)]
        return self.env_action([o[0] for o in out]), self.per_agent([o[1] for o in out]), \
            self.per_agent([o[2] for o in out])

    def evaluate(self, obs: Obs, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp, entropy, value)`` ``[B, n]`` each of the env's ``action``, differentiable."""
        out = [net.evaluate(self.view(obs, k), self.group_action(action, k)) for k, net in self._each()]
        return tuple(self.per_agent([o[i] for o in out]) for i in range(3))  # type: ignore[return-value]


class RecurrentGroupedActorCritic(GroupedActorCritic):
    """:class:`GroupedActorCritic` of :class:`~.networks.RecurrentMultiAgentActorCritic` groups:
    the state ``[B, n, S]`` is each agent's row, every group's core of one size ``S``
    (``mappo.recurrent_size``)."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: AgentActionSpec,
                 groups: tuple[AgentGroup, ...], cfg: MAPPOConfig, network: type):
        super().__init__(obs_spec, action_spec, groups, cfg, network)
        self.state_size = next(iter(self.groups.values())).state_size
        """Per agent."""

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros ``[batch, n, S]``."""
        return torch.zeros(batch, self.num_agents, self.state_size, device=self.order.device)

    def _state(self, state: torch.Tensor, k: int) -> torch.Tensor:
        return state.index_select(-2, self._rows(k))

    def value(self, obs: Obs, state: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.per_agent([net.value(self.view(obs, k), self._state(state, k)) for k, net in self._each()])

    def act(self, obs: Obs, state: torch.Tensor,  # type: ignore[override]
            deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp [B, n], value [B, n], new_state [B, n, S])``, no grad."""
        out = [self._at_random(net.act(view, self._state(state, k), deterministic), view, k)
               for k, net in self._each() for view in (self.view(obs, k),)]
        new_state = self._in_env_order(torch.cat([o[3] for o in out], -2), -2)
        return (self.env_action([o[0] for o in out]), self.per_agent([o[1] for o in out]),
                self.per_agent([o[2] for o in out]), new_state)

    def evaluate(self, obs, action):
        raise TypeError("a recurrent policy is evaluated over sequences: evaluate_sequence(obs, action, state0, reset)")

    def evaluate_sequence(self, obs: Obs, action: torch.Tensor, state0: torch.Tensor, reset: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp, entropy, value)`` ``[T, B, n]`` each, every group's sequences replayed by its own network."""
        out = [net.evaluate_sequence(self.view(obs, k), self.group_action(action, k), self._state(state0, k), reset)
               for k, net in self._each()]
        return tuple(self.per_agent([o[i] for o in out]) for i in range(3))  # type: ignore[return-value]


def _agent_dim(spec: AgentActionSpec) -> int:
    """The agents' dimension of an action tensor: last for one discrete action per agent, else the
    one before the action's own values."""
    return -1 if isinstance(spec, AgentDiscrete) else -2
