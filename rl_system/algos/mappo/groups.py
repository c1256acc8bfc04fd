"""Agent groups (BenchMARL's group map): the agents of a multi-agent env fall into groups, and each
group has its own policy (:class:`~.grouped.GroupedActorCritic`).

By default a group is the agents of identical spaces (observation width and action, the env's
:class:`~rl_system.envs.base.AgentSpace`), named after its agents (``adversary_0``,
``adversary_1`` -> ``adversary``); ``mappo.groups`` names them instead, ``{group: [agent, ...]}``.
An env whose agents are all alike is one group, and trains on the one network it always had.
Torch-free apart from the specs it reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rl_system.envs.base import AgentActionSpec, AgentSpace, TensorSpec, agent_spaces

_GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class AgentGroup:
    """Agents ``agents`` (their rows in the env's agent order) sharing one observation width
    ``obs_width`` and one action kind, ``action`` (of ``len(agents)`` agents)."""

    name: str
    agents: tuple[int, ...]
    obs_width: int
    action: AgentActionSpec


def make_groups(obs_spec: dict[str, TensorSpec], action_spec: AgentActionSpec,
                named: dict[str, list[str]] | None = None) -> tuple[AgentGroup, ...]:
    """The env's agent groups: ``named`` (``mappo.groups``) or by identical spaces, in the order
    of their first agent. ``ValueError`` (one line) for a group map that names an unknown agent,
    leaves one out, names one twice or puts agents of unlike spaces in one group."""
    spaces = agent_spaces(obs_spec, action_spec)
    members = _named(spaces, named) if named else _by_spaces(spaces)
    return tuple(_group(name, rows, spaces) for name, rows in members.items())


def _by_spaces(spaces: tuple[AgentSpace, ...]) -> dict[str, list[int]]:
    by_key: dict[tuple, list[int]] = {}
    for j, space in enumerate(spaces):
        by_key.setdefault((space.obs_width, space.action), []).append(j)
    rows = list(by_key.values())
    # Named after its agents' names without their numbers, in order ("bob_alice" where two kinds share spaces)
    names = ["_".join(dict.fromkeys(_prefix(spaces[j].name) for j in r)) for r in rows]
    if len(rows) == 1:
        names = ["agents"] if len(names[0]) > 40 else names
    if len(set(names)) < len(names) or not all(_GROUP_NAME.match(n) and len(n) <= 40 for n in names):
        names = [f"group_{k}" for k in range(len(rows))]
    return dict(zip(names, rows))


def _prefix(agent: str) -> str:
    """``adversary_0`` -> ``adversary``, ``robot3`` -> ``robot``: an agent's name without its number."""
    return re.sub(r"[_-]?\d+$", "", agent) or agent


def _named(spaces: tuple[AgentSpace, ...], named: dict[str, list[str]]) -> dict[str, list[int]]:
    index = {s.name: j for j, s in enumerate(spaces)}
    known = ", ".join(index)
    owner: dict[str, str] = {}
    members: dict[str, list[int]] = {}
    for group, agents in named.items():
        if not _GROUP_NAME.match(group):
            raise ValueError(f"mappo.groups: group name {group!r} must be an identifier (letters, digits, _)")
        if not agents:
            raise ValueError(f"mappo.groups: group {group!r} has no agents")
        for agent in agents:
            if agent not in index:
                raise ValueError(f"mappo.groups: group {group!r} names agent {agent!r}, which the env does not have "
                                 f"(its agents: {known})")
            if agent in owner:
                raise ValueError(f"mappo.groups: agent {agent!r} is in groups {owner[agent]!r} and {group!r}")
            owner[agent] = group
        members[group] = [index[a] for a in agents]
    left = [s.name for s in spaces if s.name not in owner]
    if left:
        raise ValueError(f"mappo.groups leaves agent {left[0]!r} out of every group (the env's agents: {known})")
    return members


def _group(name: str, rows: list[int], spaces: tuple[AgentSpace, ...]) -> AgentGroup:
    first = spaces[rows[0]]
    for j in rows[1:]:
        if (spaces[j].obs_width, spaces[j].action) != (first.obs_width, first.action):
            raise ValueError(f"mappo.groups: group {name!r} holds agent {first.name!r} ({first}) and agent "
                             f"{spaces[j].name!r} ({spaces[j]}); a group's agents need the same spaces")
    return AgentGroup(name, tuple(rows), first.obs_width, replace(first.action, num_agents=len(rows)))
