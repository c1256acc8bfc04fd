"""A trained policy after training: :mod:`.evaluation` (fresh envs, no Ray), :mod:`.video`
(one episode to H.264), :mod:`.export` (TorchScript and ONNX)."""
