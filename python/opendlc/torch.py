"""PyTorch helpers: a state dict as a checkpoint file. torch is imported on first use, so
the rest of the library works without it."""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import Future
from typing import Any, Mapping, Optional, Tuple, Union

from . import checkpoint as _ckpt
from . import environment as _env

__all__ = ["STATE_FILE", "save_state", "load_state"]

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
