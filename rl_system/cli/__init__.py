"""The ``rl-system`` command line: :mod:`.main` (the parser and the dispatch), one module per command
(:mod:`.train`, :mod:`.evaluate`, :mod:`.export`, :mod:`.check_env`, :mod:`.monitor` for status and
grafana-dashboard, :mod:`.rollouts`, :mod:`.air_combat` for AirCombat's envelope and launch map,
:mod:`.tune` for sweeps) and :mod:`.common` (the one-line failure and the ``--env`` assignments).
Every command is a thin layer over :mod:`rl_system.api` that turns errors into one line and an exit code."""
