"""One training run, driver side: :mod:`.startup` (Ray, run dir, probe), :mod:`.loop` (the rounds),
:mod:`.context` (the run's mutable state and counters), :mod:`.state` (what a checkpoint keeps of it;
--resume), :mod:`.rollback`, :mod:`.reporting` (scalars, status, summary), :mod:`.summary` (``summary.json``
as :class:`~rl_system.run.summary.RunSummary`), :mod:`.storage` (the checkpointer and archiver seen from
the driver), :mod:`.phases` (where the wall time goes)."""
