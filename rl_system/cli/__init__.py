"""The ``rl-system`` command line: :mod:`.main` (parser, train, eval, export, check-env, status,
rollouts), :mod:`.air_combat` (AirCombat's envelope and launch-map commands), :mod:`.tune` (sweeps).
Every command is a thin layer over :mod:`rl_system.api` that turns errors into one line and an exit code."""
