"""opendlc.torch with a stand-in torch module (pickle for torch.save/torch.load), so the
helper's logic is tested where PyTorch is not installed; with PyTorch installed, the real
module is used as well."""

import pickle
import sys
import types

import pytest

from opendlc.checkpoint import Checkpoints, CorruptCheckpoint


def fake_torch() -> types.ModuleType:
    m = types.ModuleType("torch")
    m.save = lambda obj, path: pickle.dump(obj, open(path, "wb"))  # type: ignore[attr-defined]
    m.load = lambda path, map_location=None: pickle.load(open(path, "rb"))  # type: ignore[attr-defined]
    return m


@pytest.fixture(params=["stand-in", "real"])
def torch_module(request, monkeypatch):
    if request.param == "real":
        real = pytest.importorskip("torch")  # optional dependency
        return real
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    return sys.modules["torch"]


def test_save_state_then_load_state(s3, torch_module, monkeypatch):
    from opendlc import torch as dlc_torch

    ck = Checkpoints("s3://ckpt/t", client=s3)
    state = {"w": [1.0, 2.0], "epoch": 3}
    fut = dlc_torch.save_state(10, state, {"loss": 0.5}, checkpoints=ck)
    state["w"].append(99.0)  # training goes on: the saved state was serialized at the call
    m = fut.result(10)
    assert [f.name for f in m.files] == ["state.pt"] and dict(m.metrics) == {"loss": 0.5}

    monkeypatch.setenv("DLC_RESUME_FROM", "")
    assert dlc_torch.load_state(checkpoints=ck) is None, "a fresh start"
    monkeypatch.setenv("DLC_RESUME_FROM", m.ref)
    got = dlc_torch.load_state(checkpoints=ck)
    assert got is not None
    manifest, loaded = got
    assert manifest.step == 10
    assert loaded["epoch"] == 3 and list(loaded["w"]) == [1.0, 2.0]


def test_load_state_of_a_checkpoint_without_state_pt(s3, torch_module):
    from opendlc import torch as dlc_torch

    ck = Checkpoints("s3://ckpt/t", client=s3)
    ck.save(1, {"other.bin": b"x"})
    with pytest.raises(CorruptCheckpoint, match="state.pt"):
        dlc_torch.load_state(1, checkpoints=ck)


def test_the_temporary_file_is_deleted_after_upload(s3, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    from opendlc import torch as dlc_torch

    dlc_torch.save_state(1, {"a": 1}, checkpoints=Checkpoints("s3://ckpt/t", client=s3)).result(10)
    assert list(tmp_path.iterdir()) == []


def test_without_torch_the_error_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    from opendlc import torch as dlc_torch

    with pytest.raises(ImportError, match="PyTorch"):
        dlc_torch.load_state(1)
