"""The publishing room: what turns ``bench/results/`` into the pages people read.

* :mod:`~bench.publish.report` -- reruns the sections behind the published figures and writes their tables;
* :mod:`~bench.publish.pages` -- the generated blocks of README.md and docs/*.md, each from the results
  (or the algorithm registry) it shows, and the check that none drifted;
* :mod:`~bench.publish.figures` -- the PNG figures of docs/, drawn from the stored results;
* :mod:`~bench.publish.capability_tables`, :mod:`~bench.publish.page_stats`, ``report_md``,
  ``report_sections`` -- the tables and checks those pages are made of.

It reads what the measuring room (``bench/``'s suites, ``bench.peers``, ``bench.harness``) wrote and
may call its suites; the measuring room never imports from here (tests/docs/test_architecture.py).
"""
