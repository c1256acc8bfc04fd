"""One agent's deterministic policy cut out of a :class:`~.networks.MultiAgentActorCritic`, for
exporting it alone (``rl-system export RUN --agent I``): a graph that takes only that agent's
observation, so it runs where the agent runs, without the other agents' inputs.

Inputs ``obs [B, O]`` and, where the env masks actions, ``action_mask [B, width]``; the agent's
one-hot index of a shared network is a constant inside. Outputs ``action`` (``[B]`` discrete,
``[B, K]`` multi-discrete, ``[B, d]`` continuous: the Gaussian's mean, squashed into the bounds
with ``action_dist: tanh_normal``), ``logp [B]``, and
``value [B]`` only with a local critic (IPPO): a central critic reads the global state, which one
agent does not see, so its graph holds no value.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from rl_system.algos.mappo.networks import AgentLinear, BoxHead, MultiAgentActorCritic, choose
from rl_system.envs.base import ACTION_MASK, AGENT_OBS, mask_width


def one_group(mlp: nn.Sequential, group: int) -> nn.Sequential:
    """A copy of ``mlp`` (of :class:`AgentLinear` layers) holding only weight group ``group``:
    ``[B, 1, in] -> [B, 1, out]``."""
    out = copy.deepcopy(mlp)
    for layer in out:
        if isinstance(layer, AgentLinear):
            layer.weight = nn.Parameter(layer.weight.data[group:group + 1].clone())
            layer.bias = nn.Parameter(layer.bias.data[group:group + 1].clone())
    return out


def graph_io(network: MultiAgentActorCritic, obs_keys: list[str]) -> tuple[list[str], list[str]]:
    """One agent's graph's input and output names (module docstring)."""
    inputs = [AGENT_OBS] + ([ACTION_MASK] if ACTION_MASK in obs_keys else [])
    return inputs, ["action", "logp"] + ([] if network.central else ["value"])


def acting_network(network: nn.Module, agent: int) -> tuple[MultiAgentActorCritic, int]:
    """``(the network that acts for agent, the agent's index in it)``: a grouped policy's group
    network (:class:`~.grouped.GroupedActorCritic`), else ``network`` itself."""
    for group in getattr(network, "agent_groups", ()):
        if agent in group.agents:
            return network.groups[group.name], group.agents.index(agent)
    return network, agent


def example_inputs(network: nn.Module, agent: int, obs_keys: list[str], batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Zeros of the agent's graph's inputs: its own observation ``[batch, O]`` (a grouped policy's
    agent: its group's width), its mask ``[batch, width]`` where the env masks actions."""
    net, _ = acting_network(network, agent)
    inputs = [torch.zeros(batch, net.actor_in - net.agent_ids.shape[1])]
    if ACTION_MASK in obs_keys:
        inputs.append(torch.zeros(batch, mask_width(net.spec), dtype=torch.bool))
    return tuple(inputs)


class OneAgentPolicy(nn.Module):
    """Agent ``agent``'s deterministic step of ``network`` (module docstring): copies of its
    actor's (and local critic's) weights, not the network itself, so the graph holds no other
    agent's weights."""

    def __init__(self, network: nn.Module, agent: int):
        super().__init__()
        norm = network.value_norm  # a grouped policy's is the whole policy's, not its groups'
        network, agent = acting_network(network, agent)
        group = agent if network.actor[0].weight.shape[0] > 1 else 0  # per-agent weights, or the shared ones
        self.spec = network.spec
        self.actor = one_group(network.actor, group)
        self.critic = None if network.central else one_group(network.critic, group)
        self.register_buffer("agent_id", network.agent_ids[agent].clone())  # empty for per-agent weights
        head = network.box_head()
        self.register_buffer("std", None if head is None else head.std[group].detach().clone())
        self.register_buffer("squash_scale", None if head is None else head.scale)
        self.register_buffer("squash_shift", None if head is None else head.shift)
        # With value normalisation the critic's output is in normalised units: the graph gives returns.
        units = None if self.critic is None or norm is None else norm.mean_std()
        self.register_buffer("value_mean", None if units is None else units[0].clone())
        self.register_buffer("value_std", None if units is None else units[1].clone())

    def forward(self, obs: torch.Tensor, *mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``obs [B, O]`` (then ``action_mask [B, width]``) -> ``(action, logp[, value])``."""
        if self.agent_id.numel():  # a shared network: the agent's one-hot index rides along
            obs = torch.cat([obs, self.agent_id.expand(obs.shape[0], -1)], dim=-1)
        x = obs.unsqueeze(1)  # [B, 1, O (+ n)]: one agent, as the network's layers take it
        head = None if self.std is None else BoxHead(self.std, self.squash_scale, self.squash_shift)
        action, logp = choose(self.spec, self.actor(x), mask[0].unsqueeze(1) if mask else None, head, True)
        if self.critic is None:
            return action.squeeze(1), logp.squeeze(1)
        value = self.critic(x).squeeze(-1).squeeze(1)
        if self.value_std is not None:
            value = value * self.value_std + self.value_mean
        return action.squeeze(1), logp.squeeze(1), value
