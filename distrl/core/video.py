"""MP4s of evaluation episodes (gymnasium's RecordVideo, moviepy): only whole episodes,
each written under a temporary name and renamed once complete, so that Ctrl-C or an
error never leaves a half-written video; without notices the user cannot act on."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym


class EpisodeVideo(gym.wrappers.RecordVideo):
    """RecordVideo that drops an episode cut short (closed before it ended) and writes
    each MP4 atomically."""

    def reset(self, **kwargs: Any) -> Any:
        self.ended = False
        return super().reset(**kwargs)

    def step(self, action: Any) -> Any:
        out = super().step(action)
        self.ended = bool(out[2] or out[3])
        return out

    def close(self) -> None:
        if self.recording and not getattr(self, "ended", False):  # cut short: no video
            self.recorded_frames, self.recording = [], False
        super().close()

    def stop_recording(self) -> None:
        name = self._video_name
        self._video_name = f".{name}.partial"
        partial = Path(self.video_folder, f"{self._video_name}.mp4")
        try:
            super().stop_recording()
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        if partial.exists():
            partial.replace(Path(self.video_folder, f"{name}.mp4"))


def episode_video(env: gym.Env, video_dir: str, prefix: str) -> EpisodeVideo:
    """``env`` recording every episode into ``video_dir`` as ``<prefix>-episode-<n>.mp4``."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # Frames are drawn off-screen: without a display SDL (pygame's renderers) would
        # say "XDG_RUNTIME_DIR is invalid ..." at every episode.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    with warnings.catch_warnings():
        # The directory the user named is written into; gymnasium warns of that whenever
        # it exists, also for the earlier episodes of this evaluation.
        warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return EpisodeVideo(env, video_dir, episode_trigger=lambda _: True,
                            name_prefix=prefix)
