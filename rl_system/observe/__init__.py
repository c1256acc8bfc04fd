"""What a run shows while it trains: :mod:`.metrics` (return windows, the run logger, TensorBoard),
:mod:`.trackers` (Weights & Biases, MLflow), :mod:`.telemetry` (Ray metrics, ``rl-system status``),
:mod:`.grafana` (the dashboard)."""
