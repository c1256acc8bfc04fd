"""Multi-agent PPO's settings: the ``mappo:`` section (:class:`MAPPOConfig`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rl_system.config.base import Strict


class MAPPOConfig(Strict):
    """MAPPO (Yu et al. 2022, "The Surprising Effectiveness of PPO in Cooperative Multi-Agent
    Games") and IPPO (de Witt et al. 2020), one algorithm: ``critic`` says which."""

    critic: Literal["central", "local"] = "central"
    """``central`` (MAPPO): each agent's value from the global ``state``; ``local`` (IPPO): from
    the agent's own observation."""
    central_value: Literal["per_agent", "joint"] = "per_agent"
    """How a central critic gives the agents' values: ``per_agent``, a pass per agent on the ``state`` and the agent's
    one-hot index (n passes of the same state per env step); ``joint``, one pass per env step on the ``state`` alone
    through one network whose last layer has n outputs, agent i's value its output i (per-agent rewards still work).
    A joint critic is one network whatever ``share_params`` says (which then sets the actor's only); with
    ``recurrent``, one core state per env. Needs ``critic: central``
    ([multi_agent.md](multi_agent.md#the-central-critic-per-agent-or-joint))."""
    groups: dict[str, list[str]] | None = None
    """Agent groups, ``{group: [agent name, ...]}`` (BenchMARL's group map): each group has its
    own actor and critic (shared by its agents where ``share_params``), a central critic still
    reads the global state. Unset: the agents of identical spaces (observation width and action)
    form a group, named after them (``adversary_0``, ``adversary_1`` -> ``adversary``); an env whose
    agents are all alike is one group. Agents in one group need the same spaces
    ([multi_agent.md](multi_agent.md#agents-of-different-kinds-agent-groups))."""
    share_params: bool = True
    """One actor and one critic for all agents of a group (each input carries the agent's index,
    one-hot), or a network per agent (their layers batched over the group's agents)."""
    reward: Literal["agent", "team"] = "agent"
    """What each agent learns from: ``agent``, its own reward (a team reward ``[N]`` counts for every
    agent); ``team``, the sum of the agents' rewards."""
    hidden_sizes: list[int] = Field(default_factory=lambda: [64, 64])
    """Hidden layers of the actor and of the critic."""
    activation: Literal["tanh", "relu"] = "tanh"
    """``tanh`` or ``relu``."""
    recurrent: Literal["none", "gru", "lstm"] = "none"
    """``gru`` or ``lstm``: a recurrent core in the actor and in the critic (as ``model.recurrent`` in
    single-agent PPO), between the inputs and the ``hidden_sizes`` layers: each agent of each env
    keeps its own state, zeroed where the env's episode begins and held while the agent is
    inactive; the worker carries it across rollouts, the learner replays whole env sequences from it
    (BPTT) ([multi_agent.md](multi_agent.md#recurrent-mappo))."""
    recurrent_size: int = Field(64, gt=0)
    """Hidden units of each core (shared by the agents, or one core each with ``share_params: false``)."""
    init_log_std: float = 0.0
    """Continuous actions: the initial log standard deviation of each action dimension."""
    action_dist: Literal["gaussian", "tanh_normal"] = "gaussian"
    """Continuous actions: ``gaussian`` draws from a diagonal Gaussian around the actor's output,
    unbounded (the env clips the action to its bounds, so a mean past a bound has no gradient back);
    ``tanh_normal`` squashes the draw with tanh into the action's bounds ``[low, high]`` (TorchRL's
    ``TanhNormal``, BenchMARL's default), the log-probability corrected by the squash's Jacobian.
    ``tanh_normal`` needs finite bounds."""
    lr: float = Field(5e-4, gt=0)
    """Adam learning rate."""
    anneal_lr: bool = False
    """Anneal it linearly to 0 at ``max_env_steps``."""
    gamma: float = Field(0.99, gt=0, le=1)
    """Discount."""
    gae_lambda: float = Field(0.95, ge=0, le=1)
    """GAE λ."""
    num_epochs: int = Field(10, gt=0)
    """Passes over each round's batch."""
    num_minibatches: int = Field(1, gt=0)
    """Minibatches per pass (rows are env steps, each with all its agents; with ``recurrent``, env sequences)."""
    clip_coef: float = Field(0.2, gt=0)
    """Surrogate clip range (and value clip range with ``clip_vloss``)."""
    clip_vloss: bool = True
    """Clip the value loss around the sampling critic's values."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus."""
    vf_coef: float = Field(1.0, ge=0)
    """Value loss weight."""
    max_grad_norm: float = Field(10.0, gt=0)
    """Global gradient-norm clip."""
    norm_adv: bool = True
    """Normalise advantages over the round's batch (the group's active agent steps). Off for sparse
    team rewards (the LBF and RWARE configs, as EPyMARL): until the first reward the advantages are
    the critic's noise, and scaled to unit variance they drive the policy into a few actions
    (entropy collapse) before any reward is seen, as HMASD's ``high_norm_adv`` says."""
    value_norm: bool = False
    """MAPPO's value normalisation: the critic learns the value targets scaled by their running mean and standard
    deviation (statistics in the policy's state: they ship with its weights and checkpoints; rollouts leave the
    worker in return units, GAE runs on them; exported graphs give values in return units)."""
    target_kl: float | None = Field(None, gt=0)
    """Stop the round's epochs after the first step whose approximate KL exceeds this."""
