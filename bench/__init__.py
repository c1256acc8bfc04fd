"""Benchmarks of rl_system, run from a checkout as ``python -m bench.<name>``. Two rooms:

**Measuring** (this folder, ``harness/``, ``peers/``): what runs and writes ``results/``.

* suites: ``bench_ppo``, ``bench_mujoco``, ``bench_minatar``, ``bench_memory``, ``bench_nav_scan``,
  ``bench_hmasd``, ``bench_marl``, ``bench_a2c``, ``bench_rllib_envs`` (learning beside peers);
  ``bench_speed`` (the headline speed figures beside their peers, one sitting); ``bench_envs``,
  ``bench_air_combat``, ``bench_navigation``, ``bench_alice_bob`` (env-only throughput);
  ``bench_codec``, ``bench_update``, ``bench_round``, ``bench_threads``, ``bench_kernels``,
  ``bench_scaling``, ``bench_startup``, ``bench_checkpoint``, ``soak``, ``gpu_check`` (the system's
  parts); ``perf_gate``, ``compare_checkouts`` and ``compare_runs`` (two commits side by side: speed,
  the same bits); ``tb_scalars`` (reading runs);
* ``harness/``: what the suites share (stamps, timing, learning runs, result writing, A/B ratios);
* ``peers/``: the other libraries' runners (RLlib, a CleanRL-style loop, Stable-Baselines3, BenchMARL).

**Publishing** (``publish/``): ``report``, ``pages``, ``figures`` and the tables they are made of,
which turn ``results/`` into README.md's and docs/'s figures. Publishing reads what measuring wrote
(and its report may run a suite); measuring never imports publishing (tests/docs/test_architecture.py).

Beside them: ``experiments/``, tooling of particular studies in the lab log; ``results/``, what the
suites measured (its README says how it is laid out).
"""
