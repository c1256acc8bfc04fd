"""A trained policy after training: :mod:`.evaluation` (fresh envs, no Ray), :mod:`.render` (one
episode to a picture), :mod:`.video` (one episode to H.264), :mod:`.launch_map` (AirCombat's
launches on the missile envelope), :mod:`.export` (TorchScript and ONNX)."""
