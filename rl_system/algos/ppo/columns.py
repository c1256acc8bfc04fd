"""PPO's columns, named once: the rollout's (from the rollout contract,
:mod:`rl_system.rollout.contract`) and those its preparation adds for the epochs
(:meth:`~rl_system.algos.ppo.trainer.PPO.prepare`).

Rollout (``[T, N]`` each unless said): ``obs.<key>``, :data:`ACTION`, :data:`LOGP`, :data:`VALUE`,
:data:`REWARD`, :data:`TERMINATED`, :data:`TRUNCATED`, :data:`TRUNC_VALUE`; :data:`DISC_RETURN` with
reward scaling; :data:`LAST_VALUE` ``[N]``; :data:`INIT_STATE` ``[N, S]`` for recurrent policies.

Prepared (flat ``[T*N]``, or ``[T, N]`` for recurrent policies): :data:`ADVANTAGE`, :data:`RETURN`
(the value target), :data:`IS_WEIGHT` (the decoupled objective's ``pi / mu``), :data:`RESET` (an
episode began before this step; recurrent only).
"""

from rl_system.rollout.contract import (
    ACTION,
    ADVANTAGE,
    DISC_RETURN,
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

IS_WEIGHT, RESET = "is_weight", "reset"

__all__ = ["ACTION", "ADVANTAGE", "DISC_RETURN", "INIT_STATE", "IS_WEIGHT", "LAST_VALUE", "LOGP", "RESET", "RETURN",
           "REWARD", "TERMINATED", "TRUNCATED", "TRUNC_VALUE", "VALUE"]
