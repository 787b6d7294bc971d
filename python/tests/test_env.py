from datetime import timedelta

import pytest

from opendlc import Env
from opendlc.environment import parse_go_duration

# What backend.BuildGang and frameworks.PyTorch give replica worker-1 of a job with a
# checkpoint, a data source on S3, a PVC data source and HPO parameters.
ENVIRON = {
    "DLC_JOB": "resnet", "DLC_JOB_UID": "7f1c", "DLC_WORKSPACE": "vision", "DLC_ATTEMPT": "2",
    "DLC_ROLE": "worker", "DLC_REPLICA": "1", "DLC_REPLICA_NAME": "resnet-a2-worker-1",
    "DLC_RESUME_FROM": "s3://ckpt/resnet/000000000120", "DLC_PARAMS": '{"lr": 0.1, "layers": 4}',
    "DLC_CHECKPOINT_URI": "s3://ckpt/resnet", "DLC_CHECKPOINT_KEEP": "3", "DLC_CHECKPOINT_EVERY": "10m0s",
    "DLC_DATA_IMAGENET": "s3://data/imagenet", "DLC_DATA_IMAGENET_ENDPOINT": "http://s3.local",
    "DLC_DATA_IMAGENET_ACCESS_KEY_ID": "ak", "DLC_DATA_IMAGENET_SECRET_ACCESS_KEY": "sk",
    "DLC_DATA_SCRATCH_SET": "/mnt/scratch", "DLC_DATA_SCRATCH_SET_PATH": "/mnt/scratch",
    "DLC_S3_ENDPOINT": "http://127.0.0.1:7070", "AWS_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret",
    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "2", "RANK": "1", "NODE_RANK": "1",
    "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
}


def test_from_environ_reads_the_contract():
    e = Env.from_environ(ENVIRON)
    assert (e.job, e.job_uid, e.workspace, e.attempt) == ("resnet", "7f1c", "vision", 2)
    assert (e.role, e.replica, e.replica_name) == ("worker", 1, "resnet-a2-worker-1")
    assert e.resume_from == "s3://ckpt/resnet/000000000120"
    assert dict(e.params) == {"lr": 0.1, "layers": 4}
    assert (e.checkpoint_uri, e.checkpoint_keep, e.checkpoint_every) == ("s3://ckpt/resnet", 3, timedelta(minutes=10))
    assert sorted(e.data) == ["IMAGENET", "SCRATCH_SET"]
    img = e.data_source("imagenet")
    assert img is not None and (img.uri, img.path, img.endpoint, img.access_key_id, img.secret_access_key) == (
        "s3://data/imagenet", None, "http://s3.local", "ak", "sk")
    scratch = e.data_source("scratch-set")
    assert scratch is not None and (scratch.uri, scratch.path) == ("/mnt/scratch", "/mnt/scratch")
    assert (e.s3.endpoint, e.s3.region, e.s3.access_key, e.s3.secret_key, e.s3.path_style) == (
        "http://127.0.0.1:7070", "eu-west-1", "key", "secret", True)
    r = e.rendezvous
    assert (r.master_addr, r.master_port, r.world_size, r.rank, r.node_rank, r.local_rank, r.local_world_size) == (
        "127.0.0.1", 29500, 2, 1, 1, 0, 1)
    assert not e.is_leader
    assert "secret" not in repr(e), "secrets stay out of repr"


def test_env_is_frozen():
    e = Env.from_environ(ENVIRON)
    with pytest.raises(AttributeError):
        e.job = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        e.params["lr"] = 1  # type: ignore[index]


def test_outside_opendlc_everything_is_empty():
    e = Env.from_environ({})
    assert (e.job, e.attempt, e.checkpoint_uri, e.checkpoint_every, e.resume_from) == ("", 0, "", None, "")
    assert dict(e.params) == {} and dict(e.data) == {}
    assert (e.s3.endpoint, e.s3.region, e.s3.path_style) == ("", "us-east-1", False)
    assert e.rendezvous.rank is None and e.is_leader


def test_custom_and_tensorflow_rendezvous():
    e = Env.from_environ({
        "DLC_HOSTS": "chief-0=10.0.0.1,worker-0=10.0.0.2", "DLC_WORLD_SIZE": "2", "DLC_RANK": "0",
        "TF_CONFIG": '{"cluster":{"chief":["10.0.0.1:2222"]},"task":{"type":"chief","index":0}}',
    })
    r = e.rendezvous
    assert list(r.hosts.items()) == [("chief-0", "10.0.0.1"), ("worker-0", "10.0.0.2")]
    assert (r.world_size, r.rank) == (2, 0)
    assert r.tf_config is not None and r.tf_config["task"] == {"type": "chief", "index": 0}


def test_a_data_source_named_like_a_suffix_is_its_own_source():
    e = Env.from_environ({"DLC_DATA_LOGS_PATH": "s3://b/logs"})  # spec.data name "logs-path"
    assert list(e.data) == ["LOGS_PATH"] and e.data["LOGS_PATH"].uri == "s3://b/logs"


def test_path_style_follows_dlc_s3_path_style():
    base = {"DLC_S3_ENDPOINT": "http://x"}
    assert not Env.from_environ({**base, "DLC_S3_PATH_STYLE": "false"}).s3.path_style
    assert Env.from_environ({"DLC_S3_PATH_STYLE": "1"}).s3.path_style
    assert Env.from_environ({**base, "DLC_S3_PATH_STYLE": "maybe"}).s3.path_style  # Go ignores what it cannot parse


@pytest.mark.parametrize("name,value", [
    ("DLC_ATTEMPT", "two"), ("DLC_PARAMS", "{lr: 1}"), ("DLC_PARAMS", "[1]"), ("WORLD_SIZE", "2.0"),
    ("DLC_CHECKPOINT_EVERY", "10 minutes"), ("DLC_HOSTS", "worker-0"), ("TF_CONFIG", "nope"),
])
def test_malformed_variables_are_named(name, value):
    with pytest.raises(ValueError, match=name):
        Env.from_environ({name: value})


@pytest.mark.parametrize("s,seconds", [
    ("0s", 0), ("0", 0), ("10m0s", 600), ("1h30m0s", 5400), ("1.5s", 1.5), ("500ms", 0.5), ("2h0m0.25s", 7200.25),
    ("-1m", -60), ("3us", 3e-6), ("1µs", 1e-6),
])
def test_parse_go_duration(s, seconds):
    assert parse_go_duration(s).total_seconds() == pytest.approx(seconds)
