"""VMAS's own pictures of a ``vmas:<scenario>`` env (:mod:`rl_system.envs.vmas_adapter`), env
index 0: the frames of ``rl-system eval RUN --video OUT.mp4`` (and ``--render OUT.png``, the last
frame), and the VMAS picture of the docs (``bench/figures_envs.py``).

VMAS draws with pyglet 1.5 through OpenGL: headless through EGL where a ``libEGL`` with a device
is found (Mesa's software one will do), else in an X display (``DISPLAY``, e.g. Xvfb's). Where
neither is there, the first frame fails with pyglet's own error, raised here as one
:class:`~rl_system.envs.render.RenderError` line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rl_system.envs.render import FramesRenderer, RenderError

NEEDS = ("VMAS draws with pyglet (installed with vmas) through OpenGL: headless it needs libEGL "
         "(e.g. Mesa's: apt-get install libegl1 libegl-mesa0), else an X display (e.g. Xvfb, DISPLAY=:99)")


def vmas_frame(env: Any, env_index: int = 0) -> np.ndarray:
    """RGB ``[H, W, 3]`` uint8: VMAS's picture of env ``env_index`` of ``env`` (a
    :class:`~rl_system.envs.vmas_adapter.VmasVecEnv`), drawn off screen."""
    try:
        image = env.env.render(mode="rgb_array", env_index=env_index, visualize_when_rgb=False)
    # pyglet without a display or OpenGL fails many ways (ImportError, NoSuchDisplayException, GL errors)
    except Exception as err:  # noqa: BLE001
        first = (str(err).splitlines() or [""])[0][:160]
        raise RenderError(f"VMAS cannot draw here ({type(err).__name__}: {first}); {NEEDS}") from None
    return np.asarray(image, dtype=np.uint8)


class VmasRenderer(FramesRenderer):
    """VMAS's picture of env index 0 after every step (:func:`vmas_frame`)."""

    def picture(self, env: Any) -> np.ndarray:
        return vmas_frame(env)
