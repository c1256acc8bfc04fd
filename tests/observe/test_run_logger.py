"""The run logger's held scalars (rl_system/observe/metrics.py): a round's scalars are kept as
they were when logged and written later (the run loop writes them while the learner updates);
nothing held is lost at close, and the sinks see every write in the order it was logged."""

from __future__ import annotations

from rl_system.observe.metrics import RunLogger, read_scalars


class Recording:
    def __init__(self):
        self.calls: list[tuple[int, dict[str, float]]] = []

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.calls.append((step, dict(scalars)))

    def close(self, status: str) -> None:
        self.calls.append((-1, {"closed": 1.0}))


def test_held_scalars_are_written_later_in_order_and_at_close(tmp_path):
    tracker = Recording()
    log = RunLogger(tmp_path, tensorboard=True, trackers=[tracker])
    values = {"loss": 1.0}
    log.scalars(10, values, prefix="train/", hold=True)
    values["loss"] = 99.0  # the held copy is the value as logged
    assert tracker.calls == []
    log.scalars(10, {"saved": 1}, prefix="system/")  # an immediate write writes what is held first
    assert tracker.calls == [(10, {"train/loss": 1.0}), (10, {"system/saved": 1.0})]
    log.scalars(20, {"loss": 0.5}, prefix="train/", hold=True)
    log.write_held()
    assert tracker.calls[-1] == (20, {"train/loss": 0.5})
    log.scalars(30, {"loss": 0.25, "skipped": True, "nan": float("nan")}, prefix="train/", hold=True)
    log.close("completed")
    assert tracker.calls[-2:] == [(30, {"train/loss": 0.25}), (-1, {"closed": 1.0})]
    assert read_scalars(tmp_path / "tb")["train/loss"] == [(10, 1.0), (20, 0.5), (30, 0.25)]
