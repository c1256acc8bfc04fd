"""One episode of a checkpoint's policy as a video: ``rl-system eval CHECKPOINT --video OUT.mp4``.

The episode is played by :func:`rl_system.policy.render.record_episode` and recorded by the env's
renderer (:mod:`rl_system.envs.render`: AirCombat, Navigation and CartPole draw the episode so far
with matplotlib; a ``gym:<id>`` env gives its own ``rgb_array`` pictures, a ``vmas:<scenario>`` env
VMAS's), then encoded as H.264
with PyAV (FFmpeg's libraries, in the wheel). A long episode is shown through ``max_frames`` frames
evenly spread over it. The file is written to a temporary name and renamed: a failed encode leaves
nothing behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rl_system.envs.render import FramesRenderer, RenderError, make_renderer, require_matplotlib
from rl_system.filesystems import atomic_path
from rl_system.policy.render import record_episode

CONTAINERS = (".mp4", ".mkv", ".mov")


def frame_indices(steps: int, max_frames: int) -> list[int]:
    """Frames ``0..steps`` (the reset state, then one per step), thinned evenly to at most
    ``max_frames``, the first and last kept."""
    if steps + 1 <= max_frames:
        return list(range(steps + 1))
    return sorted({round(i * steps / (max_frames - 1)) for i in range(max_frames)})


def _import_av() -> Any:
    try:
        import av
    except ImportError:
        raise RenderError("a video needs PyAV: pip install av (or pip install -e '.[render]' in a checkout)") from None
    return av


def encode(frames: Any, out: Path, fps: int) -> tuple[int, tuple[int, int]]:
    """Write RGB ``[H, W, 3]`` uint8 frames (an iterable) to ``out`` as H.264 (yuv420p; odd sizes
    padded by a pixel); returns ``(frames written, (width, height))``."""
    av = _import_av()
    count, size = 0, (0, 0)
    with atomic_path(out) as tmp, av.open(tmp, mode="w") as container:
        stream = None
        for image in frames:
            h, w = image.shape[:2]
            if stream is None:
                size = (w + w % 2, h + h % 2)  # yuv420p needs even sides
                stream = container.add_stream("libx264", rate=fps)
                stream.width, stream.height = size
                stream.pix_fmt = "yuv420p"
            if (w, h) != size:
                image = np.pad(image, ((0, size[1] - h), (0, size[0] - w), (0, 0)), mode="edge")
            container.mux(stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")))
            count += 1
        if stream is None:
            raise RenderError("the episode gave no frame to encode")
        container.mux(stream.encode(None))  # flush the encoder
    return count, size


def write_video(state: dict[str, Any], out_path: str | Path, deterministic: bool = True, seed: int = 12345,
                fps: int = 30, max_frames: int = 300, dpi: int = 80) -> dict[str, Any]:
    """Run one episode (env index 0) of the checkpoint ``state``'s policy and write it to
    ``out_path`` (``.mp4``, ``.mkv`` or ``.mov``). Returns the episode's summary plus ``path``,
    ``frames``, ``fps`` and ``size`` (width, height); raises :class:`RenderError` (one line) for an
    env without a renderer, a missing package or an unknown container."""
    from rl_system.checkpoint import keys
    from rl_system.config import RunConfig

    out = Path(out_path)
    if out.suffix.lower() not in CONTAINERS:
        raise RenderError(f"{out.name}: a video is written as {', '.join(CONTAINERS)}")
    if fps < 1 or max_frames < 2:
        raise RenderError("a video needs fps >= 1 and at least 2 frames")
    renderer = make_renderer(RunConfig.model_validate(state[keys.CONFIG]).env.name)
    _import_av()
    if not isinstance(renderer, FramesRenderer):
        require_matplotlib()  # the other renderers draw every frame with it
    meta = record_episode(state, renderer, deterministic=deterministic, seed=seed)
    picks = frame_indices(meta["steps"], max_frames)
    count, size = encode(renderer.video_frames(meta, picks, dpi=dpi), out, fps)
    meta.pop("rewards", None)
    return {**meta, "path": str(out), "frames": count, "fps": fps, "size": size}
