import hashlib
import json
import os
import threading
from datetime import datetime, timezone

import pytest

from opendlc.checkpoint import (
    Checkpoints, CheckpointError, CorruptCheckpoint, InvalidURI, Manifest, NoCheckpoint, format_go_time,
    parse_go_time, parse_ref, parse_uri, ref_for,
)

T = datetime(2026, 3, 1, 2, 0, 0, tzinfo=timezone.utc)


def store(s3, uri="s3://ckpt/job", **kw) -> Checkpoints:
    return Checkpoints(uri, client=s3, clock=lambda: T, **kw)


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.mark.parametrize("uri,want", [
    ("s3://ckpt/jobs/resnet", ("ckpt", "jobs/resnet")),
    ("s3://ckpt/resnet//", ("ckpt", "resnet")),
    ("s3://ckpt", ("ckpt", "")),
    ("s3://ckpt/", ("ckpt", "")),
    ("s3://my-bucket.v2/x", ("my-bucket.v2", "x")),
    ("s3://" + "a" * 63, ("a" * 63, "")),
])
def test_parse_uri(uri, want):
    assert parse_uri(uri) == want


@pytest.mark.parametrize("uri,error", [
    ("ckpt/resnet", "must start with s3://"), ("S3://ckpt/r", "must start with s3://"),
    ("s3:///resnet", "missing bucket name"), ("s3://ab/x", "3 to 63 characters"),
    ("s3://Ckpt/x", "lowercase letters"), ("s3://my_bucket/x", "lowercase letters"),
    ("s3://-ckpt/x", "begin and end"), ("s3://ckpt/a//b", "empty path segment"),
    ("s3://ckpt/a/../b", "'..'"), ("s3://" + "a" * 64 + "/x", "3 to 63 characters"),
])
def test_parse_uri_rejects(uri, error):
    with pytest.raises(InvalidURI, match=error):
        parse_uri(uri)


@pytest.mark.parametrize("ref,want", [
    ("s3://ckpt/jobs/a/000000000120", ("s3://ckpt/jobs/a", 120)),
    ("s3://ckpt/jobs/a/120", ("s3://ckpt/jobs/a", 120)),
    ("s3://ckpt/a/000000000007/", ("s3://ckpt/a", 7)),
    ("s3://ckpt/000000000000", ("s3://ckpt", 0)),
])
def test_parse_ref(ref, want):
    assert parse_ref(ref) == want
    assert parse_ref(ref_for(*want)) == want


@pytest.mark.parametrize("ref", [
    "s3://ckpt/jobs/a", "s3://ckpt/a/-1", "s3://ckpt/a/+1", "s3://ckpt", "ckpt/a/1", "s3://CK/1",
    "s3://ckpt/a/99999999999999999999", "", "s3://ckpt/a/1e3",
])
def test_parse_ref_rejects(ref):
    with pytest.raises(InvalidURI):
        parse_ref(ref)


def test_ref_for_pads_to_12_digits():
    assert ref_for("s3://ckpt/a/", 120) == "s3://ckpt/a/000000000120"


def test_go_time_format_round_trips():
    assert format_go_time(T) == "2026-03-01T02:00:00Z"
    t = datetime(2026, 12, 1, 19, 39, 9, 120000, tzinfo=timezone.utc)
    assert format_go_time(t) == "2026-12-01T19:39:09.12Z"
    assert parse_go_time("2026-12-01T19:39:09.120000999Z") == t
    assert parse_go_time("2026-12-01T20:39:09.12+01:00") == t
    with pytest.raises(ValueError):
        parse_go_time("2026-12-01 19:39:09")


def test_save_writes_files_then_the_manifest_in_the_go_layout(s3, tmp_path):
    (tmp_path / "shards").mkdir()
    (tmp_path / "weights.bin").write_bytes(b"w" * 1000)
    (tmp_path / "shards" / "0.bin").write_bytes(b"zero")
    m = store(s3).save(120, tmp_path, {"loss": 0.5, "acc": 1})
    assert m.ref == "s3://ckpt/job/000000000120"
    assert s3.puts == ["job/000000000120/shards/0.bin", "job/000000000120/weights.bin",
                       "job/000000000120/MANIFEST.json"], "files sorted by name, manifest last"
    doc = json.loads(s3.objects["ckpt"]["job/000000000120/MANIFEST.json"])
    assert doc == {
        "step": 120, "time": "2026-03-01T02:00:00Z",
        "files": [{"name": "shards/0.bin", "size": 4, "sha256": sha(b"zero")},
                  {"name": "weights.bin", "size": 1000, "sha256": sha(b"w" * 1000)}],
        "metrics": {"loss": 0.5, "acc": 1.0},
    }
    assert s3.objects["ckpt"]["job/000000000120/weights.bin"] == b"w" * 1000


def test_manifest_without_metrics_omits_the_key(s3):
    store(s3).save(1, {"a": b"x"})
    assert "metrics" not in json.loads(s3.objects["ckpt"]["job/000000000001/MANIFEST.json"])


def test_uploads_are_streamed_in_parts(s3, tmp_path):
    big = os.urandom(3 * 1024 * 1024 + 5)
    (tmp_path / "big").write_bytes(big)
    m = store(s3, multipart_chunksize=1 << 20).save(1, tmp_path / "big")
    # The uploader reads the (non-seekable) stream in parts; the hash covers every part.
    assert s3.largest_read == 1 << 20
    assert m.files[0].size == len(big) and m.files[0].sha256 == sha(big)


def test_save_accepts_a_list_of_files_and_a_mapping(s3, tmp_path):
    (tmp_path / "a.txt").write_bytes(b"A")
    (tmp_path / "b.txt").write_bytes(b"B")
    m = store(s3).save(1, [tmp_path / "a.txt", str(tmp_path / "b.txt")])
    assert [f.name for f in m.files] == ["a.txt", "b.txt"]
    m = store(s3).save(2, {"opt/state": tmp_path / "a.txt", "meta.json": b"{}"})
    assert [(f.name, f.size) for f in m.files] == [("meta.json", 2), ("opt/state", 1)]


@pytest.mark.parametrize("step,files,metrics,error", [
    (-1, {"a": b""}, None, "step"),
    (True, {"a": b""}, None, "step"),
    (1, {"MANIFEST.json": b""}, None, "reserved"),
    (1, {"a/../b": b""}, None, "path segment"),
    (1, {"/abs": b""}, None, "path segment"),
    (1, {"": b""}, None, "empty file name"),
    (1, {"a": b""}, {"loss": float("nan")}, "finite"),
    (1, {"a": b""}, {"loss": float("-inf")}, "finite"),
])
def test_save_rejects_bad_input_before_writing(s3, step, files, metrics, error):
    with pytest.raises(ValueError, match=error):
        store(s3).save(step, files, metrics)
    assert s3.puts == []


def test_list_and_latest_skip_incomplete_steps(s3):
    ck = store(s3)
    assert ck.list() == [] and ck.latest() is None
    for step in (3, 1, 2):
        ck.save(step, {"w": bytes([step])})
    s3.objects["ckpt"]["job/000000000009/w"] = b"save in progress"
    s3.objects["ckpt"]["job/7/MANIFEST.json"] = b"not at the padded place"
    s3.objects["ckpt"]["job/notes.txt"] = b"not a step"
    assert [m.step for m in ck.list()] == [1, 2, 3]
    latest = ck.latest()
    assert latest is not None and latest.step == 3 and latest.ref == "s3://ckpt/job/000000000003"
    assert latest.time == T


def test_load_verifies_and_writes_into_dest(s3, tmp_path):
    ck = store(s3)
    ck.save(5, {"w.bin": b"weights", "sub/o": b"optimizer"}, {"loss": 0.25})
    dest = tmp_path / "out"
    for what in (5, "s3://ckpt/job/000000000005", "s3://ckpt/job/5", ck.latest()):
        m = ck.load(what, dest)
        assert m.step == 5 and dict(m.metrics) == {"loss": 0.25}
        assert (dest / "w.bin").read_bytes() == b"weights"
        assert (dest / "sub" / "o").read_bytes() == b"optimizer"
    assert sorted(p.name for p in dest.rglob("*")) == ["o", "sub", "w.bin"], "no temporary files left"


def test_load_detects_corruption_and_keeps_the_bad_file_out(s3, tmp_path):
    ck = store(s3)
    ck.save(1, {"w": b"good", "x": b"fine"})
    s3.objects["ckpt"]["job/000000000001/w"] = b"evil"  # same size, other content
    with pytest.raises(CorruptCheckpoint, match="sha256"):
        ck.load(1, tmp_path)
    assert not (tmp_path / "w").exists()
    del s3.objects["ckpt"]["job/000000000001/w"]
    with pytest.raises(CorruptCheckpoint, match="missing"):
        ck.load(1, tmp_path)
    s3.objects["ckpt"]["job/000000000001/MANIFEST.json"] = b"{not json"
    with pytest.raises(CorruptCheckpoint, match="unreadable"):
        ck.load(1, tmp_path)
    s3.objects["ckpt"]["job/000000000001/MANIFEST.json"] = Manifest(2, T, ()).to_json()
    with pytest.raises(CorruptCheckpoint, match="manifest says step 2"):
        ck.load(1, tmp_path)


def test_load_refuses_manifest_names_that_escape_dest(s3, tmp_path):
    ck = store(s3)
    s3.objects["ckpt"]["job/000000000001/MANIFEST.json"] = json.dumps(
        {"step": 1, "time": "2026-03-01T02:00:00Z", "files": [{"name": "../evil", "size": 0, "sha256": sha(b"")}]}).encode()
    with pytest.raises(CorruptCheckpoint, match="path segment"):
        ck.load(1, tmp_path / "dest")
    assert not (tmp_path / "evil").exists()


def test_load_of_an_incomplete_step(s3, tmp_path):
    ck = store(s3)
    s3.objects["ckpt"]["job/000000000004/w"] = b"no manifest"
    with pytest.raises(NoCheckpoint, match="incomplete or missing"):
        ck.load(4, tmp_path)


def test_saving_a_step_again_replaces_it(s3, tmp_path):
    ck = store(s3)
    ck.save(1, {"w": b"old"})
    s3.fail_on = "job/000000000001/w"
    with pytest.raises(CheckpointError):
        ck.save(1, {"w": b"new"})
    assert ck.latest() is None, "the old manifest is gone before the new files are written"
    s3.fail_on = None
    ck.save(1, {"w": b"new"})
    ck.load(1, tmp_path)
    assert (tmp_path / "w").read_bytes() == b"new"


def test_bucket_root_location(s3, tmp_path):
    ck = store(s3, "s3://root")
    ck.save(7, {"w": b"x"})
    assert s3.keys("root") == ["000000000007/MANIFEST.json", "000000000007/w"]
    m = ck.latest()
    assert m is not None and m.ref == "s3://root/000000000007"
    ck.load(m.ref, tmp_path)


def test_prune_matches_the_go_rules(s3):
    # The scenario of Go's TestPrune.
    ck = store(s3)
    raw = s3.objects["ckpt"]
    raw["job/000000000000/w"] = b"died before step 1"
    for step in range(1, 6):
        ck.save(step, {"w": bytes([step]), "sub/o": bytes([step])})
    raw["job/000000000004/leftover"] = b"from a previous attempt"
    raw["job/000000000003x/w"] = b"not a step dir"
    raw["job/000000000009/w"] = b"save in progress"

    assert ck.prune(0) == [0], "keep 0 keeps every complete checkpoint but clears the dead save"
    assert ck.prune(2) == [1, 2, 3]
    assert [m.step for m in ck.list()] == [4, 5]
    assert s3.keys("ckpt", "job/") == [
        "000000000003x/w",
        "000000000004/MANIFEST.json", "000000000004/leftover", "000000000004/sub/o", "000000000004/w",
        "000000000005/MANIFEST.json", "000000000005/sub/o", "000000000005/w",
        "000000000009/w",
    ]
    assert ck.prune(2) == []


def test_save_async_is_ordered_and_wait_returns_every_manifest(s3, tmp_path):
    gate = threading.Event()
    original = s3.upload_fileobj

    def slow_upload(*args, **kwargs):
        gate.wait(5)
        return original(*args, **kwargs)

    s3.upload_fileobj = slow_upload
    ck = store(s3)
    futures = [ck.save_async(step, {"w": bytes([step])}) for step in (1, 2, 3)]
    assert not any(f.done() for f in futures), "save_async returns before uploading"
    assert s3.puts == []
    gate.set()
    assert [m.step for m in ck.wait()] == [1, 2, 3]
    manifests = [k for k in s3.puts if k.endswith("MANIFEST.json")]
    assert manifests == [f"job/00000000000{i}/MANIFEST.json" for i in (1, 2, 3)]
    assert ck.wait() == []


def test_a_failed_async_save_does_not_stop_the_next(s3):
    ck = store(s3)
    s3.fail_on = "job/000000000001/w"
    first = ck.save_async(1, {"w": b"1"})
    second = ck.save_async(2, {"w": b"2"})
    with pytest.raises(CheckpointError, match="000000000001"):
        ck.wait()
    assert first.exception() is not None and second.result().step == 2
    assert [m.step for m in ck.list()] == [2]


def test_save_async_delete_after_removes_the_local_files(s3, tmp_path):
    d = tmp_path / "stage"
    d.mkdir()
    (d / "model.pt").write_bytes(b"m")
    store(s3).save_async(1, d, delete_after=True).result(5)
    assert not d.exists()
    assert s3.objects["ckpt"]["job/000000000001/model.pt"] == b"m"


def test_save_async_checks_its_input_at_once(s3):
    with pytest.raises(ValueError):
        store(s3).save_async(-1, {"w": b""})


def test_default_location_comes_from_the_environment(s3, monkeypatch):
    import opendlc.checkpoint as ckpt

    monkeypatch.delenv("DLC_CHECKPOINT_URI", raising=False)
    with pytest.raises(CheckpointError, match="DLC_CHECKPOINT_URI"):
        Checkpoints()
    monkeypatch.setenv("DLC_CHECKPOINT_URI", "s3://ckpt/from-env")
    monkeypatch.setattr(ckpt, "_default", Checkpoints(client=s3))
    ckpt.save(3, {"w": b"x"})
    assert [m.ref for m in ckpt.list()] == ["s3://ckpt/from-env/000000000003"]


def test_resume_loads_dlc_resume_from(s3, monkeypatch, tmp_path):
    import opendlc.checkpoint as ckpt

    store(s3, "s3://ckpt/elsewhere").save(8, {"w": b"eight"})
    monkeypatch.setattr(ckpt, "s3_client", lambda cfg=None: s3)
    monkeypatch.setenv("DLC_RESUME_FROM", "")
    assert ckpt.resume(tmp_path) is None, "a fresh start"
    monkeypatch.setenv("DLC_RESUME_FROM", "s3://ckpt/elsewhere/000000000008")
    m = ckpt.resume(tmp_path)
    assert m is not None and m.step == 8 and (tmp_path / "w").read_bytes() == b"eight"


def test_s3_client_is_configured_like_the_go_client(monkeypatch):
    from opendlc.checkpoint import s3_client
    from opendlc.environment import S3Config

    c = s3_client(S3Config(endpoint="http://127.0.0.1:7070", region="eu-west-1", access_key="a", secret_key="b",
                           path_style=True))
    assert c.meta.endpoint_url == "http://127.0.0.1:7070"
    assert c.meta.region_name == "eu-west-1"
    assert c.meta.config.s3["addressing_style"] == "path"
    creds = c._request_signer._credentials
    assert (creds.access_key, creds.secret_key) == ("a", "b")
    with pytest.raises(CheckpointError, match="both"):
        s3_client(S3Config(access_key="a"))
