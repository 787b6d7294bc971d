"""PyTorch helpers: a state dict as a checkpoint file, and a preemption notice agreed by
every rank. torch is imported on first use, so the rest of the library works without
it."""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import Future
from typing import Any, Mapping, Optional, Tuple, Union

from . import checkpoint as _ckpt
from . import environment as _env
from . import preemption as _preemption

__all__ = ["STATE_FILE", "save_state", "load_state", "save_on_notice", "notice_agreed"]

STATE_FILE = "state.pt"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ImportError("opendlc.torch needs PyTorch (import torch failed)") from None
    return torch


def save_state(step: int, state: Mapping[str, Any], metrics: Optional[Mapping[str, float]] = None, *,
               checkpoints: Optional[_ckpt.Checkpoints] = None) -> "Future[_ckpt.Manifest]":
    """Serializes state (a state_dict, or a dict of them) with torch.save into a private
    temporary file now, so training may change the tensors as soon as this returns, then
    uploads it as the checkpoint of step (file state.pt) in the background. The file is
    deleted once uploaded. Returns the save's future; opendlc.wait() waits for it."""
    torch = _torch()
    ck = checkpoints or _ckpt.default()
    tmp = tempfile.mkdtemp(prefix=f"opendlc-step{step}-")
    try:
        torch.save(state, os.path.join(tmp, STATE_FILE))
        return ck.save_async(step, tmp, metrics, delete_after=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load_state(step_or_ref: Union[None, int, str, _ckpt.Manifest] = None, *, map_location: Any = "cpu",
               checkpoints: Optional[_ckpt.Checkpoints] = None) -> Optional[Tuple[_ckpt.Manifest, Any]]:
    """Loads the state saved by save_state: from step_or_ref when given, else from
    DLC_RESUME_FROM. Returns (manifest, state), or None on a fresh start (no
    DLC_RESUME_FROM and nothing asked for). Hashes are checked before torch.load."""
    torch = _torch()
    if step_or_ref is None:
        step_or_ref = _env.env().resume_from or None
        if step_or_ref is None:
            return None
    if checkpoints is None:
        if isinstance(step_or_ref, int):
            checkpoints = _ckpt.default()
        else:
            ref = step_or_ref.ref if isinstance(step_or_ref, _ckpt.Manifest) else step_or_ref
            checkpoints = _ckpt.Checkpoints(_ckpt.parse_ref(ref)[0])
    tmp = tempfile.mkdtemp(prefix="opendlc-load-")
    try:
        m = checkpoints.load(step_or_ref, tmp)
        path = os.path.join(tmp, STATE_FILE)
        if not os.path.exists(path):
            raise _ckpt.CorruptCheckpoint(f"{m.ref}: no {STATE_FILE} (not saved by opendlc.torch.save_state)")
        return m, torch.load(path, map_location=map_location)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def save_on_notice(notice: _preemption.Notice, step: int, state: Mapping[str, Any],
                   metrics: Optional[Mapping[str, float]] = None, *,
                   checkpoints: Optional[_ckpt.Checkpoints] = None, exit: bool = True) -> _ckpt.Manifest:
    """Takes a notice with state as the final checkpoint: prints the notice line, saves
    state as save_state does (after the saves already queued for the location), waits
    for the upload, prints the dlc:checkpoint line, and exits 128+N (with exit=False,
    returns the manifest). Call it on the rank that saves; the others call
    notice.exit()."""
    m = notice.finish(step, lambda: save_state(step, state, metrics, checkpoints=checkpoints), exit=exit)
    assert m is not None
    return m


def notice_agreed(notice: _preemption.Notice, group: Any = None) -> bool:
    """Whether any rank of the process group has a notice: an all-reduce (MAX) of each
    rank's signal number (0 for none), so that every rank stops after the same step. In
    data-parallel training the ranks get the signal at different moments; a rank that
    stopped on its own flag would leave the others waiting in their next collective
    until the process is killed. A rank that has no signal of its own takes the notice
    with the signal another rank got (notice.requested, notice.signal and
    notice.exit_code then answer as if it had come). Every rank must call it at the same
    points (after each step, or every few steps to spare the collective). Without
    torch.distributed initialized it is notice.requested."""
    torch = _torch()
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return notice.requested
    device: Any = "cpu"
    if dist.get_backend(group) == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    sig = notice.signal
    # A float32: with an int32 tensor, 3-rank gloo runs of examples/pytorch/ddp under
    # load hung at exit 4 times in 18 (torch 1.13); as float32 (exact for any signal
    # number) 12 of 12 ended. Signal numbers are small integers either way.
    flag = torch.tensor([float(sig) if sig is not None else 0.0], dtype=torch.float32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
    agreed = int(flag.item())
    if agreed:
        notice._take(agreed)
    return agreed != 0
