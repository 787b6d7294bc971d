"""Preemption notice: a final checkpoint when the replica is told to stop.

When OpenDLC stops a job's replicas — a preemption by a job of higher priority, a quota
reclaimed by its owner, a spot node reclaimed, a user's stop — every process gets SIGTERM,
and SIGKILL once the grace period has passed (30 s by default on Kubernetes, the pods'
terminationGracePeriodSeconds; 5 s on the local backend). Python's default for SIGTERM
is to die at once, losing the work since the last periodic checkpoint. With a Notice the
signal only sets a flag; the training loop reads it after each step, saves a final
checkpoint of the state it has and exits 128+N:

    notice = opendlc.on_notice()                 # SIGTERM and SIGINT; main thread only
    for step in range(start + 1, steps + 1):
        train_step()
        if notice.requested:
            notice.checkpoint(step, files)       # prints the lines, saves, exits 143

Lines printed on stdout (the contract with the control plane, as the Go example trainer
prints them):

    dlc:notice signal=SIGTERM step=S             when the notice is taken, before saving
    dlc:checkpoint step=S uri=REF                once the checkpoint of step S is complete

The handler does nothing but record the signal and when it came: it may interrupt the
main thread anywhere (inside a print, holding a lock), so all the work happens in the
loop. A second signal while the notice is pending is not deferred: the handler that was
installed before the notice gets it (Python's default for SIGINT raises
KeyboardInterrupt; the default for SIGTERM ends the process), so a second Ctrl-C still
stops a program at once. restore() (or leaving a `with` block) puts the previous handlers
back.

If the save does not finish within the grace period, the process is killed mid-upload;
the step has no manifest, so it is incomplete, and the job resumes from the last
complete checkpoint.
"""

from __future__ import annotations

import signal as _signal
import threading
import time
from concurrent.futures import Future
from types import FrameType, TracebackType
from typing import Any, Callable, Dict, Iterable, Mapping, NoReturn, Optional, Type, Union

from . import checkpoint as _ckpt
from . import metrics as _metrics

__all__ = [
    "NOTICE_PREFIX", "CHECKPOINT_PREFIX", "DEFAULT_SIGNALS", "Notice", "on_notice",
    "format_notice_line", "format_checkpoint_line", "report_checkpoint",
]

NOTICE_PREFIX = "dlc:notice"
CHECKPOINT_PREFIX = "dlc:checkpoint"
DEFAULT_SIGNALS = (_signal.SIGTERM, _signal.SIGINT)

# What a save callable handed to Notice.finish may return.
SaveResult = Union[_ckpt.Manifest, "Future[_ckpt.Manifest]", None]
_Handler = Union[Callable[[int, Optional[FrameType]], Any], int, None]


def format_notice_line(sig: Union[int, _signal.Signals], step: int) -> str:
    """`dlc:notice signal=SIGTERM step=<step>`, without its newline."""
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"step must be an int, not {type(step).__name__}")
    return f"{NOTICE_PREFIX} signal={_signal.Signals(sig).name} step={step}"


def format_checkpoint_line(m: _ckpt.Manifest) -> str:
    """`dlc:checkpoint step=<step> uri=<ref>`, without its newline."""
    return f"{CHECKPOINT_PREFIX} step={m.step} uri={m.ref}"


def report_checkpoint(m: _ckpt.Manifest) -> str:
    """Prints the dlc:checkpoint line of a complete checkpoint on stdout and flushes it.
    Returns the line."""
    return _metrics.print_line(format_checkpoint_line(m))


class Notice:
    """Turns SIGTERM and SIGINT (or the given signals) into a flag the training loop
    reads. install() (or on_notice(), or a `with` block) installs the handlers; it must
    run in the main thread, where Python runs signal handlers. The flag and the other
    properties may be read from any thread."""

    def __init__(self, signals: Iterable[Union[int, _signal.Signals]] = DEFAULT_SIGNALS) -> None:
        self.signals = tuple(_signal.Signals(s) for s in signals)
        if not self.signals:
            raise ValueError("a Notice needs at least one signal")
        self._previous: Dict[_signal.Signals, _Handler] = {}
        self._signum: Optional[int] = None
        self._monotonic: Optional[float] = None
        self._wall: Optional[float] = None

    # ---- the handler ----

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self._signum is None:
            # Only record: this may run between any two bytecodes of the main thread.
            self._monotonic = time.monotonic()
            self._wall = time.time()
            self._signum = signum
            return
        # A second signal: not deferred. The previous handler gets it, and stays.
        sig = _signal.Signals(signum)
        previous = self._previous.pop(sig, _signal.SIG_DFL)
        _signal.signal(sig, previous if previous is not None else _signal.SIG_DFL)
        if callable(previous):
            previous(signum, frame)
        elif previous != _signal.SIG_IGN:  # SIG_DFL, or a handler set outside Python
            _signal.raise_signal(signum)

    def _take(self, signum: int) -> None:
        """Takes a notice that came to another rank (opendlc.torch.notice_agreed), unless
        this process has its own."""
        if self._signum is None:
            self._monotonic = time.monotonic()
            self._wall = time.time()
            self._signum = signum

    # ---- installing ----

    def install(self) -> "Notice":
        """Installs the handlers, remembering the ones they replace. Raises RuntimeError
        outside the main thread, or if this Notice is installed already."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(
                "opendlc.preemption: install the notice from the main thread: Python runs "
                "signal handlers only there (create it at start-up, before other threads; "
                "notice.requested may then be read from any thread)")
        if self._previous:
            raise RuntimeError("opendlc.preemption: this Notice is installed already")
        previous: Dict[_signal.Signals, _Handler] = {}
        try:
            for sig in self.signals:
                previous[sig] = _signal.signal(sig, self._handle)
        except BaseException:
            for sig, h in previous.items():
                _signal.signal(sig, h if h is not None else _signal.SIG_DFL)
            raise
        self._previous = previous
        return self

    def restore(self) -> None:
        """Puts back the handlers install() replaced (SIG_DFL for one that was not set
        from Python) and leaves the state of the notice as it is. Main thread only."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("opendlc.preemption: restore the handlers from the main thread")
        previous, self._previous = self._previous, {}
        for sig, h in previous.items():
            _signal.signal(sig, h if h is not None else _signal.SIG_DFL)

    def __enter__(self) -> "Notice":
        return self.install()

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.restore()

    # ---- the state ----

    @property
    def requested(self) -> bool:
        """Whether a signal has come: save and stop."""
        return self._signum is not None

    @property
    def signal(self) -> Optional[_signal.Signals]:
        """The first signal received, or None."""
        return None if self._signum is None else _signal.Signals(self._signum)

    @property
    def received_at(self) -> Optional[float]:
        """When the first signal came, as time.time(), or None."""
        return self._wall

    def elapsed(self) -> Optional[float]:
        """Seconds since the first signal came (monotonic clock), or None."""
        return None if self._monotonic is None else time.monotonic() - self._monotonic

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (SIGTERM: 143, SIGINT: 130), the shell's convention
        for a process stopped by a signal. Raises RuntimeError before any signal."""
        if self._signum is None:
            raise RuntimeError("opendlc.preemption: no signal has come")
        return 128 + self._signum

    # ---- taking the notice ----

    def announce(self, step: int) -> str:
        """Prints `dlc:notice signal=SIGTERM step=<step>` and flushes it; returns it."""
        if self._signum is None:
            raise RuntimeError("opendlc.preemption: no signal has come")
        return _metrics.print_line(format_notice_line(self._signum, step))

    def exit(self) -> NoReturn:
        """Raises SystemExit(exit_code): finally blocks and atexit handlers run, and the
        interpreter waits for the background saves still queued before it exits."""
        raise SystemExit(self.exit_code)

    def finish(self, step: int, save: Optional[Callable[[], SaveResult]] = None, *,
               exit: bool = True) -> Optional[_ckpt.Manifest]:
        """Takes the notice: prints the notice line for step, calls save (which returns
        the Manifest, a Future of it, or None when it saved nothing), waits for it,
        prints the dlc:checkpoint line once the checkpoint is complete, then exits with
        exit_code — or, with exit=False, returns the manifest. An error of the save
        propagates (the process then fails with it, and the job resumes from the last
        complete checkpoint). Ranks other than the one that saves call exit()."""
        self.announce(step)
        got = save() if save is not None else None
        m = got.result() if isinstance(got, Future) else got
        if m is not None:
            report_checkpoint(m)
        if exit:
            self.exit()
        return m

    def checkpoint(self, step: int, files: _ckpt.Files, metrics: Optional[Mapping[str, float]] = None, *,
                   checkpoints: Optional[_ckpt.Checkpoints] = None, exit: bool = True) -> _ckpt.Manifest:
        """finish() with a save of files as the checkpoint of step (to checkpoints,
        default DLC_CHECKPOINT_URI). The save joins the location's queue, after the
        saves queued before it with save_async, so manifests still appear in step order;
        it is waited for before the dlc:checkpoint line."""
        ck = checkpoints or _ckpt.default()
        m = self.finish(step, lambda: ck.save_async(step, files, metrics), exit=exit)
        assert m is not None
        return m


def on_notice(signals: Iterable[Union[int, _signal.Signals]] = DEFAULT_SIGNALS) -> Notice:
    """A Notice for signals (SIGTERM and SIGINT by default), installed. Main thread only."""
    return Notice(signals).install()
