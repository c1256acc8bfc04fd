"""Examples: a complete bring-your-own env and network package (:mod:`examples.grid_reach`) and
RLlib on an rl_system env (``rllib_navigation.py``)."""
