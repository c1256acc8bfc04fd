"""rl_system: a distributed actor-learner reinforcement-learning system on Ray."""

__version__ = "0.1.0"
