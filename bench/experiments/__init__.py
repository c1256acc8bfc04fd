"""Tooling of particular studies, kept so their figures in the docs can be reproduced; not part of
the benchmark suites. Each runs as ``python -m bench.experiments.<name>`` (``--help`` says how):

* ``air_combat_baselines``: outcome rates of scripted red policies against AirCombat's scripted blue;
* ``hmasd_round_stats``: per-run round statistics of HMASD runs from their TensorBoard scalars;
* ``hmasd_throughput``: in-process HMASD sampler and update throughput on Alice_and_Bob;
* ``hmasd_update_commits.sh``: that update time at several commits, alternating between them;
* ``pbt_alice_bob``: a PBT population of the HMASD preset tested beside the reseed-on-stall preset;
* ``sweep_memory``: in-process sweep of the recurrent CartPole config's overrides.
"""
