"""The Ray actors of a run and how they are placed: :mod:`.worker` (RolloutWorker), :mod:`.learner`
(Learner), :mod:`.learner_group` (N learners, one round), :mod:`.collective` (the learner side of a
group: all-reduce, global statistics), :mod:`.placement` (will they fit; start-up waits and failures)."""
