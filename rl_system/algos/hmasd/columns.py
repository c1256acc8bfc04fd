"""HMASD's rollout columns, named once through the rollout contract
(:mod:`rl_system.rollout.contract`: the prefix of a name gives its layout). ``T`` steps, ``N`` envs,
``n`` agents, ``S``/``O`` the state and per-agent observation widths, ``H`` the GRU width.

Every rollout (hierarchy or flat MAPPO):

* :data:`STATE` ``[T, N, S]``, :data:`AGENT_OBS` ``[T, N, n, O]`` -- the observation dict's two keys;
* :data:`ACTION` ``[T, N, n]`` int64, :data:`LOGP`, :data:`VALUE` ``[T, N, n]`` (values in return units),
  :data:`REWARD` ``[T, N]`` team reward, :data:`TERMINATED`, :data:`TRUNCATED` ``[T, N]`` bool,
  :data:`TRUNC_VALUE` ``[T, N, n]`` ``V(final obs)`` where an episode was truncated;
* :data:`LAST_VALUE` ``[N, n]``; :data:`INIT_H_ACTOR`, :data:`INIT_H_CRITIC` ``[N, n, H]`` the GRU hiddens
  entering the rollout.

With the hierarchy (the coordinator's samples, one per skill window):

* :data:`SKILL_TEAM` ``[T, N]``, :data:`SKILL_AGENT` ``[T, N, n]`` int64 -- the skills in force;
* :data:`WINDOW_START` ``[T, N]`` bool -- a skill window begins at this step;
* :data:`HIGH_LOGP`, :data:`HIGH_VALUE`, :data:`HIGH_TRUNC_VALUE` ``[T, N, n + 1]`` (team + agents) at
  window starts; :data:`LAST_HIGH_VALUE` ``[N, n + 1]``.

With the hierarchy or the novelty bonus (the observation after each step, for the discriminators):

* :data:`LAST_STATE` ``[N, S]``, :data:`LAST_AGENT_OBS` ``[N, n, O]``;
* :data:`FINAL_STATE` ``[E, S]``, :data:`FINAL_AGENT_OBS` ``[E, n, O]`` -- where an episode ended.
"""

from rl_system.rollout.contract import (
    ACTION,
    ADVANTAGE,
    LAST_VALUE,
    LOGP,
    OLD_VALUE,
    RETURN,
    REWARD,
    TERMINATED,
    TRUNC_VALUE,
    TRUNCATED,
    VALUE,
    final_column,
    init_column,
    last_column,
    obs_column,
)

STATE, AGENT_OBS = obs_column("state"), obs_column("obs")
INIT_H_ACTOR, INIT_H_CRITIC = init_column("h_actor"), init_column("h_critic")

SKILL_TEAM, SKILL_AGENT = "skill_team", "skill_agent"
WINDOW_START, HIGH_LOGP, HIGH_VALUE, HIGH_TRUNC_VALUE = "h_start", "h_logp", "h_value", "h_trunc_value"
LAST_HIGH_VALUE = last_column(HIGH_VALUE)

LAST_STATE, LAST_AGENT_OBS = last_column(STATE), last_column(AGENT_OBS)
FINAL_STATE, FINAL_AGENT_OBS = final_column(STATE), final_column(AGENT_OBS)

__all__ = ["ACTION", "ADVANTAGE", "AGENT_OBS", "FINAL_AGENT_OBS", "FINAL_STATE", "HIGH_LOGP", "HIGH_TRUNC_VALUE", "HIGH_VALUE",
           "INIT_H_ACTOR", "INIT_H_CRITIC", "LAST_AGENT_OBS", "LAST_HIGH_VALUE", "LAST_STATE", "LAST_VALUE", "LOGP",
           "OLD_VALUE", "RETURN", "REWARD", "SKILL_AGENT", "SKILL_TEAM", "STATE", "TERMINATED", "TRUNCATED", "TRUNC_VALUE", "VALUE",
           "WINDOW_START"]
