"""A typed view of the environment OpenDLC gives every replica.

The variables are those of the training-code contract (docs/architecture.md): the DLC_*
variables that backend.BuildGang sets, the S3 settings, and the rendezvous variables of
the job's framework (frameworks/*.go).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Mapping, Optional

__all__ = ["Env", "DataSource", "S3Config", "Rendezvous", "env", "parse_go_duration", "env_name"]


def env_name(name: str) -> str:
    """The form a name takes in variable names (Go's backend.EnvName): upper case, with
    '-' and '.' turned into '_'."""
    return name.upper().replace("-", "_").replace(".", "_")


@dataclass(frozen=True)
class DataSource:
    """One spec.data entry: DLC_DATA_<NAME> and the variables that share its prefix."""

    name: str  # as it appears in the variable names (upper case, '_' for '-' and '.')
    uri: str  # DLC_DATA_<NAME>: the source's URI, or a PVC's mount path
    path: Optional[str] = None  # DLC_DATA_<NAME>_PATH: where it is mounted, if it is
    endpoint: Optional[str] = None  # DLC_DATA_<NAME>_ENDPOINT (an S3 source on kubernetes)
    region: Optional[str] = None  # DLC_DATA_<NAME>_REGION
    access_key_id: Optional[str] = None  # DLC_DATA_<NAME>_ACCESS_KEY_ID
    secret_access_key: Optional[str] = field(default=None, repr=False)  # ..._SECRET_ACCESS_KEY


_DATA_SUFFIXES = {
    "_PATH": "path",
    "_ENDPOINT": "endpoint",
    "_REGION": "region",
    "_ACCESS_KEY_ID": "access_key_id",
    "_SECRET_ACCESS_KEY": "secret_access_key",
}


@dataclass(frozen=True)
class S3Config:
    """How to reach S3, read as Go's checkpoint.ConfigFromEnv reads it."""

    endpoint: str = ""  # DLC_S3_ENDPOINT; empty means AWS
    region: str = "us-east-1"  # AWS_REGION, default us-east-1
    access_key: str = ""  # AWS_ACCESS_KEY_ID
    secret_key: str = field(default="", repr=False)  # AWS_SECRET_ACCESS_KEY
    # Path-style addressing (endpoint/bucket): on when an endpoint is set, unless
    # DLC_S3_PATH_STYLE says otherwise.
    path_style: bool = False


@dataclass(frozen=True)
class Rendezvous:
    """The framework's rendezvous variables; None where the framework does not set them.

    rank and world_size are torch's RANK/WORLD_SIZE (pytorch, deepspeed, megatron) or, for
    the custom framework, DLC_RANK/DLC_WORLD_SIZE.
    """

    master_addr: Optional[str] = None  # MASTER_ADDR
    master_port: Optional[int] = None  # MASTER_PORT
    world_size: Optional[int] = None  # WORLD_SIZE or DLC_WORLD_SIZE
    rank: Optional[int] = None  # RANK or DLC_RANK
    node_rank: Optional[int] = None  # NODE_RANK
    local_rank: Optional[int] = None  # LOCAL_RANK
    local_world_size: Optional[int] = None  # LOCAL_WORLD_SIZE
    # DLC_HOSTS ("worker-0=host,worker-1=host", rank order) as {"worker-0": "host", ...}
    hosts: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    tf_config: Optional[Mapping[str, Any]] = None  # TF_CONFIG, decoded


@dataclass(frozen=True)
class Env:
    """The environment of one replica. Outside OpenDLC every field has its empty default."""

    job: str = ""  # DLC_JOB
    job_uid: str = ""  # DLC_JOB_UID
    workspace: str = ""  # DLC_WORKSPACE
    attempt: int = 0  # DLC_ATTEMPT
    role: str = ""  # DLC_ROLE
    replica: int = 0  # DLC_REPLICA: the replica's index within its role
    replica_name: str = ""  # DLC_REPLICA_NAME
    checkpoint_uri: str = ""  # DLC_CHECKPOINT_URI: s3://bucket/prefix, or "" for none
    checkpoint_keep: int = 0  # DLC_CHECKPOINT_KEEP: complete checkpoints to keep; 0 = all
    checkpoint_every: Optional[timedelta] = None  # DLC_CHECKPOINT_EVERY (a Go duration)
    resume_from: str = ""  # DLC_RESUME_FROM: a checkpoint ref, "" on a fresh start
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # DLC_PARAMS
    # DLC_STOP_AT_STEP: with an experiment's algorithm pbt, the value of the step metric at
    # which this trial's generation ends: save a checkpoint there and exit 0. None otherwise.
    stop_at_step: Optional[int] = None
    data: Mapping[str, DataSource] = field(default_factory=lambda: MappingProxyType({}))
    s3: S3Config = field(default_factory=S3Config)
    rendezvous: Rendezvous = field(default_factory=Rendezvous)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Env":
        """Reads the variables from environ; raises ValueError naming a malformed one."""
        get = lambda name: environ.get(name, "")  # noqa: E731
        params: Mapping[str, Any] = MappingProxyType({})
        if get("DLC_PARAMS"):
            try:
                decoded = json.loads(get("DLC_PARAMS"))
            except ValueError as e:
                raise ValueError(f"DLC_PARAMS is not JSON: {e}") from None
            if not isinstance(decoded, dict):
                raise ValueError("DLC_PARAMS must be a JSON object")
            params = MappingProxyType(decoded)
        every = None
        if get("DLC_CHECKPOINT_EVERY"):
            every = parse_go_duration(get("DLC_CHECKPOINT_EVERY"), "DLC_CHECKPOINT_EVERY")
        return cls(
            job=get("DLC_JOB"),
            job_uid=get("DLC_JOB_UID"),
            workspace=get("DLC_WORKSPACE"),
            attempt=_int(environ, "DLC_ATTEMPT") or 0,
            role=get("DLC_ROLE"),
            replica=_int(environ, "DLC_REPLICA") or 0,
            replica_name=get("DLC_REPLICA_NAME"),
            checkpoint_uri=get("DLC_CHECKPOINT_URI"),
            checkpoint_keep=_int(environ, "DLC_CHECKPOINT_KEEP") or 0,
            checkpoint_every=every,
            resume_from=get("DLC_RESUME_FROM"),
            params=params,
            stop_at_step=_int(environ, "DLC_STOP_AT_STEP"),
            data=_data_sources(environ),
            s3=_s3_config(environ),
            rendezvous=_rendezvous(environ),
        )

    def data_source(self, name: str) -> Optional[DataSource]:
        """The data source of spec.data entry name (as written in the spec), if any."""
        return self.data.get(env_name(name))

    @property
    def is_leader(self) -> bool:
        """Whether this replica is rank 0 (or the only one): the one that should report
        metrics and write checkpoints when every replica holds the same state."""
        return (self.rendezvous.rank or 0) == 0


def env() -> Env:
    """The environment of this process."""
    return Env.from_environ(os.environ)


def _int(environ: Mapping[str, str], name: str) -> Optional[int]:
    v = environ.get(name, "")
    if v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{name}={v!r} is not an integer") from None


def _bool(v: str) -> Optional[bool]:
    """Go's strconv.ParseBool; None for what it rejects."""
    if v in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if v in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def _s3_config(environ: Mapping[str, str]) -> S3Config:
    endpoint = environ.get("DLC_S3_ENDPOINT", "")
    path_style = endpoint != ""
    explicit = _bool(environ.get("DLC_S3_PATH_STYLE", ""))
    if explicit is not None:
        path_style = explicit
    return S3Config(
        endpoint=endpoint,
        region=environ.get("AWS_REGION", "") or "us-east-1",
        access_key=environ.get("AWS_ACCESS_KEY_ID", ""),
        secret_key=environ.get("AWS_SECRET_ACCESS_KEY", ""),
        path_style=path_style,
    )


def _data_sources(environ: Mapping[str, str]) -> Mapping[str, DataSource]:
    # DLC_DATA_X_PATH is source X's mount path when DLC_DATA_X is set too; otherwise it
    # is a source of its own (one named "x-path").
    names = {k[len("DLC_DATA_"):] for k in environ if k.startswith("DLC_DATA_") and len(k) > len("DLC_DATA_")}
    extras: dict[str, dict[str, str]] = {}
    bases = set(names)
    for n in names:
        for suffix, attr in _DATA_SUFFIXES.items():
            base = n[: -len(suffix)]
            if n.endswith(suffix) and base in names:
                extras.setdefault(base, {})[attr] = environ["DLC_DATA_" + n]
                bases.discard(n)
    out = {n: DataSource(name=n, uri=environ["DLC_DATA_" + n], **extras.get(n, {})) for n in sorted(bases)}
    return MappingProxyType(out)


def _rendezvous(environ: Mapping[str, str]) -> Rendezvous:
    hosts: dict[str, str] = {}
    for item in filter(None, environ.get("DLC_HOSTS", "").split(",")):
        name, sep, host = item.partition("=")
        if not sep:
            raise ValueError(f"DLC_HOSTS entry {item!r} is not name=host")
        hosts[name] = host
    tf_config = None
    if environ.get("TF_CONFIG"):
        try:
            tf_config = MappingProxyType(json.loads(environ["TF_CONFIG"]))
        except (ValueError, TypeError) as e:
            raise ValueError(f"TF_CONFIG is not a JSON object: {e}") from None
    world_size = _int(environ, "WORLD_SIZE")
    rank = _int(environ, "RANK")
    return Rendezvous(
        master_addr=environ.get("MASTER_ADDR") or None,
        master_port=_int(environ, "MASTER_PORT"),
        world_size=world_size if world_size is not None else _int(environ, "DLC_WORLD_SIZE"),
        rank=rank if rank is not None else _int(environ, "DLC_RANK"),
        node_rank=_int(environ, "NODE_RANK"),
        local_rank=_int(environ, "LOCAL_RANK"),
        local_world_size=_int(environ, "LOCAL_WORLD_SIZE"),
        hosts=MappingProxyType(hosts),
        tf_config=tf_config,
    )


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(s: str, what: str = "duration") -> timedelta:
    """Parses a Go time.Duration string such as "10m0s", "1h30m" or "1.5s"."""
    body, sign = s, 1.0
    if body[:1] in "+-" and body:
        sign, body = (-1.0 if body[0] == "-" else 1.0), body[1:]
    if body == "0":
        return timedelta(0)
    pos, seconds = 0, 0.0
    while pos < len(body):
        m = _DURATION_PART.match(body, pos)
        if not m:
            raise ValueError(f"{what}={s!r} is not a Go duration (such as 10m0s)")
        seconds += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise ValueError(f"{what}={s!r} is not a Go duration (such as 10m0s)")
    return timedelta(seconds=sign * seconds)
