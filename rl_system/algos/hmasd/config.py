"""HMASD hyperparameters: :class:`rl_system.config.HMASDConfig` (the ``hmasd:`` config section).

The class lives in :mod:`rl_system.config` with the other sections; it is re-exported here."""

from rl_system.config import HMASDConfig

__all__ = ["HMASDConfig"]
