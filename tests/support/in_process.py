"""In-process training rounds for the algorithm tests: a sampler and a trainer without Ray.
Imported by the tests as ``in_process``."""

from __future__ import annotations


def train_rounds(sampler, trainer, rounds: int) -> list[float]:
    """``rounds`` of collect-then-update (the update on a copy of the columns, as a learner gets
    them); each round's mean episode return."""
    returns = []
    for r in range(rounds):
        cols, episodes = sampler.collect()
        trainer.update({k: v.clone() for k, v in cols.items()}, r / rounds)
        returns.append(float(episodes.returns.mean()))
    return returns
