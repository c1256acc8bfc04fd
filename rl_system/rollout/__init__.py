"""A rollout from worker to learner: :mod:`.contract` (RolloutMeta, column layouts, concat),
:mod:`.codec` (the columnar LZ4 wire format), :mod:`.gate` (policy-version gating), :mod:`.staging`
(CUDA rollouts to pinned host memory), :mod:`.archive` (Arrow IPC archives) and
:mod:`.archive_inspect` (one archive rendered for a person)."""
