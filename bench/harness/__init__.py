"""What the benchmark suites share.

* :mod:`bench.harness.stamp`: where and when a figure was measured (date, commit, machine,
  library versions, load average) and the one-line Markdown form of it.
* :mod:`bench.harness.timing`: best-of-repeats rates by the wall clock and by CPU time, medians of
  short calls, a torch thread count held for one measurement.
* :mod:`bench.harness.learning`: training runs as bench rows: rl_system runs (train a shipped
  config, read its summary and curve), Ray for in-process runs, curves of any peer.
* :mod:`bench.harness.results`: where results go and how: one stamped JSON and one Markdown per
  suite, compressed per-run files (``.json.xz``), aggregates that reference them.
* :mod:`bench.harness.markdown`: Markdown tables and number formats.

Nothing here imports torch, Ray or rl_system at module level, so a suite's ``--help`` stays fast.
"""
