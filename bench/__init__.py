"""Benchmarks of rl_system, run from a checkout as ``python -m bench.<name>``.

* suites (this folder): ``report`` (README's tables), ``bench_ppo``, ``bench_mujoco``,
  ``bench_minatar``, ``bench_memory``, ``bench_nav_scan``, ``bench_hmasd``, ``bench_rllib_envs``
  (learning beside peers); ``bench_envs``, ``bench_air_combat``, ``bench_navigation``,
  ``bench_alice_bob`` (env-only throughput); ``bench_codec``, ``bench_update``, ``bench_kernels``,
  ``bench_scaling``, ``bench_startup``, ``bench_checkpoint``, ``soak``, ``gpu_check`` (the
  system's parts); ``compare_runs`` and ``tb_scalars`` (reading runs);
* ``harness/``: what the suites share (stamps, timing, learning runs, result writing);
* ``peers/``: the other libraries' runners (RLlib, a CleanRL-style loop, Stable-Baselines3);
* ``experiments/``: tooling of particular studies in the docs;
* ``results/``: what the suites measured (its README says how it is laid out).
"""
