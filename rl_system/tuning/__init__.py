"""Hyperparameter sweeps of whole runs on Ray Tune: ``rl-system tune`` (:mod:`.sweep`)."""
