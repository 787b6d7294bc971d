"""The progress display of wait(): a tqdm bar where tqdm is installed (Debian's
python3-tqdm) and a terminal is attached, else one line on stderr whenever the state
changes, or nothing."""

from __future__ import annotations

import sys
from typing import IO, Any, Optional, Tuple


def attached(stream: Optional[IO[str]] = None) -> bool:
    """Whether stream (default stderr) is a terminal."""
    stream = stream or sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Progress:
    """done out of total (None: unknown) with a status text."""

    def __init__(self, desc: str, enabled: Optional[bool] = None, stream: Optional[IO[str]] = None):
        self._stream = stream or sys.stderr
        self.enabled = attached(self._stream) if enabled is None else enabled
        self._desc = desc
        self._bar: Any = None
        self._last: Optional[Tuple[int, Optional[int], str]] = None
        if not self.enabled:
            return
        try:
            from tqdm import tqdm  # type: ignore[import]
        except ImportError:
            return
        self._bar = tqdm(desc=desc, total=None, file=self._stream, leave=True, unit="", dynamic_ncols=True,
                         bar_format="{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed}")

    def update(self, done: int, total: Optional[int], status: str) -> None:
        if not self.enabled:
            return
        state = (done, total, status)
        if state == self._last:
            return
        self._last = state
        if self._bar is None:
            of = f"{done}/{total} " if total else ""
            print(f"{self._desc}: {of}{status}", file=self._stream, flush=True)
            return
        if total is not None and self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        self._bar.set_description_str(f"{self._desc} [{status}]", refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
