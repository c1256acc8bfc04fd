"""bench/tb_scalars.py reads the TensorBoard files the system writes (tensorboardX), including a
file whose last record is still being written."""

from __future__ import annotations

import pytest
from tensorboardX import SummaryWriter

from bench.tb_scalars import read_scalars, table


def test_reads_what_the_writer_wrote_and_stops_at_a_torn_tail(tmp_path):
    w = SummaryWriter(str(tmp_path / "tb"))
    for step in range(5):
        w.add_scalar("rollout/success_rate", step / 4, step * 100)
        w.add_scalar("train/reward_term_env", -step, step * 100)
    w.close()
    scalars = read_scalars(tmp_path)
    assert scalars["rollout/success_rate"] == {s * 100: s / 4 for s in range(5)}
    text = table(scalars, ["success_rate", "reward_term_env"], every=2)
    assert text.splitlines()[0] == "| env steps | success_rate | reward_term_env |"
    assert "| 400 | 1 | -4 |" in text and len(text.splitlines()) == 2 + 3
    event_file = next((tmp_path / "tb").glob("events.out.tfevents.*"))
    event_file.write_bytes(event_file.read_bytes()[:-7])            # a record cut short
    torn = read_scalars(tmp_path)
    assert torn["rollout/success_rate"] == scalars["rollout/success_rate"]   # written before the torn record
    assert torn["train/reward_term_env"] == {s * 100: -s for s in range(4)}   # the last one is dropped, not garbled


def test_the_largest_fall_below_the_best_restarts_at_each_reseed():
    from bench.experiments.hmasd_round_stats import largest_fall

    returns = {100: 0.2, 200: 0.6, 300: 0.1, 400: 0.0, 500: 0.9, 600: 0.5}
    fall, at = largest_fall(returns, [])
    assert fall == pytest.approx(0.6) and at == 400
    fall, at = largest_fall(returns, [350])  # from 400 on a new attempt: its best starts at 0.0
    assert fall == pytest.approx(0.5) and at == 300
    assert largest_fall({}, []) == (0.0, None)


def test_first_at_least_gives_the_step_and_the_seconds_since_the_run_started(tmp_path):
    from rl_system.observe.metrics import first_at_least

    w = SummaryWriter(str(tmp_path))
    start = next(tmp_path.glob("events.out.tfevents.*")).stat().st_mtime
    for step, rate in enumerate([0.1, 0.5, 0.85, 0.3, 0.9]):
        w.add_scalar("rollout/win_rate", rate, step * 1000, walltime=start + 10.0 * (step + 1))
    w.close()
    step, seconds = first_at_least(tmp_path, "rollout/win_rate", 0.8)
    assert step == 2000 and seconds == pytest.approx(30.0, abs=1.0)  # from the file's opening event
    assert first_at_least(tmp_path, "rollout/win_rate", 0.95) is None
    assert first_at_least(tmp_path, "rollout/other", 0.0) is None
    event_file = next(tmp_path.glob("events.out.tfevents.*"))
    event_file.write_bytes(event_file.read_bytes()[:-7])  # a live run's last record, half written
    assert first_at_least(tmp_path, "rollout/win_rate", 0.8)[0] == 2000
