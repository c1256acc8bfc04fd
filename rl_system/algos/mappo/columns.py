"""Multi-agent PPO's columns, named once. ``T`` steps, ``N`` envs, ``n`` agents.

Rollout: ``obs.state`` ``[T, N, S]``, ``obs.obs`` ``[T, N, n, O]`` (and ``obs.action_mask``,
``obs.agent_active`` where the env has them); :data:`ACTION` ``[T, N, n, ...]``; :data:`LOGP`,
:data:`VALUE`, :data:`REWARD`, :data:`TRUNC_VALUE` ``[T, N, n]``; :data:`TERMINATED`,
:data:`TRUNCATED` ``[T, N]``; :data:`AGENT_DONE` ``[T, N, n]`` (an agent's own episode ended on
this step while the env's went on; only for envs with ``agent_active``); :data:`LAST_VALUE` ``[N, n]``;
:data:`INIT_STATE` ``[N, n, S]`` for recurrent policies.

Prepared (rows are env steps ``[T*N, n]``, or ``[T, N, n]`` for recurrent policies): :data:`ADVANTAGE`,
:data:`RETURN`, :data:`ACTIVE` (the agent steps that carry a loss), :data:`RESET` (the env's episode
began before this step; recurrent only, ``[T, N]``).
"""

from rl_system.rollout.contract import (
    ACTION,
    ADVANTAGE,
    INIT_STATE,
    LAST_VALUE,
    LOGP,
    RETURN,
    REWARD,
    TERMINATED,
    TRUNC_VALUE,
    TRUNCATED,
    VALUE,
)

AGENT_DONE = "agent_done"
ACTIVE, RESET = "active", "reset"

__all__ = ["ACTION", "ACTIVE", "ADVANTAGE", "AGENT_DONE", "INIT_STATE", "LAST_VALUE", "LOGP", "RESET", "RETURN",
           "REWARD", "TERMINATED", "TRUNCATED", "TRUNC_VALUE", "VALUE"]
