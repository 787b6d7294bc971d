"""Checkpoints in S3, in the layout of OpenDLC's Go package checkpoint.

A checkpoint location is a URI s3://bucket/prefix. The checkpoint of step N lives under
<uri>/<N padded to 12 digits>/ and holds the training code's files plus MANIFEST.json,
written last: a step without a manifest is incomplete (its writer died or is still
writing) and is never listed nor resumed from. The manifest records every file's size and
SHA-256, which load() checks. A ref, s3://bucket/prefix/<padded step>, names one
checkpoint; it is what DLC_RESUME_FROM holds.

Files are streamed: uploads go through boto3's upload_fileobj (multipart above a
threshold) from a reader that hashes what it hands over, and downloads are written to disk
chunk by chunk, so no file is ever held whole in memory.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shutil
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import environment as _env

__all__ = [
    "MANIFEST_NAME", "STEP_DIGITS", "CheckpointError", "InvalidURI", "NoCheckpoint", "CorruptCheckpoint",
    "FileEntry", "Manifest", "Checkpoints", "parse_uri", "parse_ref", "ref_for", "s3_client",
    "save", "save_async", "wait", "list", "latest", "load", "prune", "resume", "default",
]

MANIFEST_NAME = "MANIFEST.json"
STEP_DIGITS = 12
_CHUNK = 1 << 20  # download and copy buffer
_MiB = 1 << 20


class CheckpointError(Exception):
    """Base of this module's errors."""


class InvalidURI(CheckpointError, ValueError):
    """A malformed checkpoint URI or ref (Go: ErrInvalidURI)."""


class NoCheckpoint(CheckpointError):
    """No complete checkpoint where one was asked for (Go: ErrNoCheckpoint)."""


class CorruptCheckpoint(CheckpointError):
    """A file's size or SHA-256 differs from the manifest, a listed file is missing, or
    the manifest is unreadable (Go: ErrCorrupt)."""


@dataclass(frozen=True)
class FileEntry:
    """One file of a checkpoint, as recorded in its manifest."""

    name: str  # path relative to the step directory, such as "model.pt" or "shards/0.bin"
    size: int
    sha256: str  # lowercase hex


@dataclass(frozen=True)
class Manifest:
    """One complete checkpoint: the content of its MANIFEST.json, plus where it lives."""

    step: int
    time: datetime  # when it was saved, UTC (microsecond precision; Go writes nanoseconds)
    files: Tuple[FileEntry, ...]  # sorted by name
    metrics: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    ref: str = ""  # s3://bucket/prefix/<padded step>; not stored in the manifest

    def to_json(self) -> bytes:
        """The manifest as Go's json.MarshalIndent writes it (two-space indent)."""
        doc: Dict[str, Any] = {
            "step": self.step,
            "time": format_go_time(self.time),
            "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in self.files],
        }
        if self.metrics:  # Go: `json:"metrics,omitempty"`
            doc["metrics"] = dict(self.metrics)
        return json.dumps(doc, indent=2, allow_nan=False).encode()

    @classmethod
    def from_json(cls, data: bytes, ref: str = "") -> "Manifest":
        """Decodes a MANIFEST.json; raises CorruptCheckpoint if it is not one."""
        try:
            doc = json.loads(data)
            files = tuple(
                FileEntry(name=str(f["name"]), size=int(f["size"]), sha256=str(f["sha256"]))
                for f in (doc.get("files") or ())
            )
            metrics = {str(k): float(v) for k, v in (doc.get("metrics") or {}).items()}
            step = doc["step"]
            if not isinstance(step, int) or isinstance(step, bool):
                raise ValueError(f"step {step!r} is not an integer")
            return cls(step=step, time=parse_go_time(doc["time"]), files=files,
                       metrics=MappingProxyType(metrics), ref=ref)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptCheckpoint(f"{ref or 'manifest'}: unreadable {MANIFEST_NAME}: {e}") from None


# ---- URIs and refs: the rules of checkpoint.go ----

def parse_uri(uri: str) -> Tuple[str, str]:
    """Splits s3://bucket/prefix into bucket and prefix (no leading or trailing slashes;
    "" for the bucket's root)."""
    if not uri.startswith("s3://"):
        raise InvalidURI(f"invalid URI {uri!r}: must start with s3://")
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    problem = _check_bucket(bucket)
    if problem:
        raise InvalidURI(f"invalid URI {uri!r}: {problem}")
    prefix = prefix.rstrip("/")
    if prefix == "":
        return bucket, ""
    for seg in prefix.split("/"):
        if seg == "":
            raise InvalidURI(f'invalid URI {uri!r}: empty path segment ("//")')
        if seg in (".", ".."):
            raise InvalidURI(f"invalid URI {uri!r}: path segment {seg!r} is not allowed")
    return bucket, prefix


def _check_bucket(b: str) -> str:
    if b == "":
        return "missing bucket name"
    if not 3 <= len(b) <= 63:
        return f"bucket name {b!r} must be 3 to 63 characters long"
    if not re.fullmatch(r"[a-z0-9.\-]+", b):
        return f"bucket name {b!r} may only hold lowercase letters, digits, '-' and '.'"
    if not (b[0].isascii() and b[0].isalnum() and b[-1].isascii() and b[-1].isalnum()):
        return f"bucket name {b!r} must begin and end with a letter or digit"
    return ""


def step_dir(step: int) -> str:
    """The zero-padded directory name of a step."""
    return f"{step:0{STEP_DIGITS}d}"


def ref_for(uri: str, step: int) -> str:
    """The ref of the checkpoint of step in location uri."""
    return uri.rstrip("/") + "/" + step_dir(step)


def _parse_step(s: str) -> Optional[int]:
    if not re.fullmatch(r"[0-9]{1,19}", s):
        return None
    n = int(s)
    return n if n < 1 << 63 else None


def parse_ref(ref: str) -> Tuple[str, int]:
    """Splits a ref s3://bucket/prefix/<step> (padded or not) into location and step."""
    trimmed = ref.rstrip("/")
    i = trimmed.rfind("/")
    if not trimmed.startswith("s3://") or i < len("s3://"):
        raise InvalidURI(f"invalid URI {ref!r}: a checkpoint ref is s3://bucket/prefix/<step>")
    uri, last = trimmed[:i], trimmed[i + 1:]
    step = _parse_step(last)
    if step is None:
        raise InvalidURI(f"invalid URI {ref!r}: last path segment {last!r} is not a step number")
    parse_uri(uri)
    return uri, step


def _check_file_name(name: str) -> None:
    if name == "":
        raise ValueError("empty file name")
    if name == MANIFEST_NAME:
        raise ValueError(f"file name {name!r} is reserved")
    if any(seg in ("", ".", "..") for seg in name.split("/")):
        raise ValueError(f'file name {name!r}: empty, "." or ".." path segment')


def _join(a: str, b: str) -> str:
    return b if a == "" else a + "/" + b


# ---- time, as Go's time.Time marshals to JSON (RFC 3339 with nanoseconds) ----

def format_go_time(t: datetime) -> str:
    """RFC 3339 in UTC with trailing zeros of the fraction dropped, as Go writes it."""
    if t.tzinfo is None:
        raise ValueError("manifest time must be timezone-aware")
    t = t.astimezone(timezone.utc)
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        s += "." + f"{t.microsecond:06d}".rstrip("0")
    return s + "Z"


_GO_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})\Z")


def parse_go_time(s: str) -> datetime:
    """Reads an RFC 3339 time with up to nanoseconds (truncated to microseconds), in UTC."""
    m = _GO_TIME.match(s)
    if not m:
        raise ValueError(f"time {s!r} is not RFC 3339")
    year, month, day, hour, minute, sec = (int(x) for x in m.groups()[:6])
    micro = int((m.group(7) or "0").ljust(6, "0")[:6])
    zone = m.group(8)
    tz = timezone.utc
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    return datetime(year, month, day, hour, minute, sec, micro, tzinfo=tz).astimezone(timezone.utc)


# ---- S3 ----

def s3_client(cfg: Optional[_env.S3Config] = None) -> Any:
    """A boto3 S3 client configured as Go's checkpoint.NewStore configures its client:
    endpoint DLC_S3_ENDPOINT, region AWS_REGION (default us-east-1), static credentials
    when both keys are set (else boto3's default chain), path-style addressing when an
    endpoint is set (unless DLC_S3_PATH_STYLE says otherwise)."""
    import boto3
    from botocore.config import Config

    if cfg is None:
        cfg = _env.env().s3
    if bool(cfg.access_key) != bool(cfg.secret_key):
        raise CheckpointError("both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are needed, or neither")
    options: Dict[str, Any] = {"s3": {"addressing_style": "path" if cfg.path_style else "auto"}}
    if cfg.endpoint:
        # Like the Go client: only the checksums S3 requires, for S3-compatible stores
        # (these settings exist from botocore 1.36 on; older ones send none anyway).
        options.update(request_checksum_calculation="when_required", response_checksum_validation="when_required")
    try:
        config = Config(**options)
    except TypeError:
        config = Config(s3=options["s3"])
    kwargs: Dict[str, Any] = {"region_name": cfg.region or "us-east-1", "config": config}
    if cfg.endpoint:
        kwargs["endpoint_url"] = cfg.endpoint
    if cfg.access_key:
        kwargs.update(aws_access_key_id=cfg.access_key, aws_secret_access_key=cfg.secret_key)
    return boto3.client("s3", **kwargs)


def _is_not_found(e: BaseException) -> bool:
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return False
    return response.get("Error", {}).get("Code") in ("NoSuchKey", "NotFound", "404")


class _HashingReader(io.RawIOBase):
    """Hands a file's bytes to the uploader once, in order, hashing and counting them.
    It is not seekable, so boto3 reads it sequentially, part by part."""

    def __init__(self, f: BinaryIO) -> None:
        super().__init__()
        self._f = f
        self.sha256 = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, n: int = -1) -> bytes:
        b = self._f.read(n)
        self.sha256.update(b)
        self.size += len(b)
        return b

    def readinto(self, buf: Any) -> int:
        b = self.read(len(buf))
        buf[: len(b)] = b
        return len(b)


# What save() takes: a directory (every regular file under it, by relative path), one
# file (by its base name), a list of files (each by its base name), or a mapping from
# checkpoint file name to a path or to bytes.
PathLike = Union[str, "os.PathLike[str]"]
Files = Union[PathLike, Sequence[PathLike], Mapping[str, Union[PathLike, bytes]]]


def _collect(files: Files) -> List[Tuple[str, Union[str, bytes]]]:
    out: Dict[str, Union[str, bytes]] = {}

    def add(name: str, src: Union[str, bytes]) -> None:
        _check_file_name(name)
        if name in out:
            raise ValueError(f"two files named {name!r}")
        out[name] = src

    if isinstance(files, (str, os.PathLike)):
        root = os.fspath(files)
        if os.path.isdir(root):
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames.sort()
                for fn in sorted(filenames):
                    path = os.path.join(dirpath, fn)
                    if os.path.isfile(path):
                        add(os.path.relpath(path, root).replace(os.sep, "/"), path)
        elif os.path.isfile(root):
            add(os.path.basename(root), root)
        else:
            raise FileNotFoundError(root)
    elif isinstance(files, Mapping):
        for name, src in files.items():
            add(name, src if isinstance(src, bytes) else os.fspath(src))
    else:
        for p in files:
            add(os.path.basename(os.fspath(p)), os.fspath(p))
    return sorted(out.items())


def _remove(files: Files) -> None:
    """Deletes the local files save_async(delete_after=True) was given."""
    if isinstance(files, (str, os.PathLike)):
        p = os.fspath(files)
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            _unlink(p)
    elif isinstance(files, Mapping):
        for src in files.values():
            if not isinstance(src, bytes):
                _unlink(os.fspath(src))
    else:
        for f in files:
            _unlink(os.fspath(f))


def _unlink(p: str) -> None:
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass


# Saves to one location are queued on one thread, in call order, across every
# Checkpoints object of the process (Go: one save at a time per location).
_queues: Dict[Tuple[str, str], ThreadPoolExecutor] = {}
_queues_lock = threading.Lock()


def _queue(bucket: str, prefix: str) -> ThreadPoolExecutor:
    with _queues_lock:
        q = _queues.get((bucket, prefix))
        if q is None:
            q = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opendlc-checkpoint")
            _queues[(bucket, prefix)] = q
        return q


@dataclass
class _StepObjects:
    step: int
    complete: bool = False  # it holds a manifest at the canonical place
    keys: List[str] = field(default_factory=lambda: [])


class Checkpoints:
    """The checkpoints of one location, s3://bucket/prefix (default DLC_CHECKPOINT_URI).

    client is a boto3 S3 client (default: s3_client(), from the environment). Files larger
    than multipart_threshold are uploaded in parts of multipart_chunksize, at most
    max_concurrency at a time.
    """

    def __init__(
        self,
        uri: Optional[str] = None,
        *,
        client: Any = None,
        clock: Optional[Callable[[], datetime]] = None,
        multipart_threshold: int = 64 * _MiB,
        multipart_chunksize: int = 16 * _MiB,
        max_concurrency: int = 4,
    ) -> None:
        if uri is None:
            uri = _env.env().checkpoint_uri
            if not uri:
                raise CheckpointError("no checkpoint location: DLC_CHECKPOINT_URI is not set (spec.checkpoint.uri)")
        self.bucket, self.prefix = parse_uri(uri)
        self.uri = uri.rstrip("/")
        self._client = client
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._transfer = dict(multipart_threshold=multipart_threshold, multipart_chunksize=multipart_chunksize,
                              max_concurrency=max_concurrency)
        self._pending: List["Future[Manifest]"] = []
        self._pending_lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = s3_client()
        return self._client

    # ---- save ----

    def save(self, step: int, files: Files, metrics: Optional[Mapping[str, float]] = None) -> Manifest:
        """Uploads the checkpoint of step: every file, then the manifest. Saving a step that
        exists replaces it: its manifest is deleted first, so it reads as incomplete until
        the new one is written. Metrics must be finite. Returns the manifest."""
        entries, clean = self._check(step, files, metrics)
        return self._save(step, entries, clean)

    def save_async(self, step: int, files: Files, metrics: Optional[Mapping[str, float]] = None,
                   *, delete_after: bool = False) -> "Future[Manifest]":
        """Saves as save() does, on a background thread, and returns at once. Saves to one
        location run one at a time in call order, so manifests appear in step order; a
        failed save does not stop the next. The files must stay unchanged until the save
        has ended (the future is done); with delete_after they are deleted then (a
        directory with everything in it). wait() waits for every save queued here."""
        entries, clean = self._check(step, files, metrics)

        def run() -> Manifest:
            try:
                return self._save(step, entries, clean)
            finally:
                if delete_after:
                    _remove(files)

        fut = _queue(self.bucket, self.prefix).submit(run)
        with self._pending_lock:
            self._pending.append(fut)
        return fut

    def wait(self) -> List[Manifest]:
        """Waits until every save_async queued through this object has ended; returns their
        manifests in call order, or raises the first failure once all have ended."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        first: Optional[BaseException] = None
        out: List[Manifest] = []
        for fut in pending:
            e = fut.exception()
            if e is None:
                out.append(fut.result())
            elif first is None:
                first = e
        if first is not None:
            raise first
        return out

    def _check(self, step: int, files: Files, metrics: Optional[Mapping[str, float]]
               ) -> Tuple[List[Tuple[str, Union[str, bytes]]], Dict[str, float]]:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"checkpoint step {step!r} must be an integer >= 0")
        clean: Dict[str, float] = {}
        for k, v in (metrics or {}).items():
            x = float(v)
            if math.isnan(x) or math.isinf(x):
                raise ValueError(f"checkpoint step {step}: metric {k!r} is {x}; metrics must be finite")
            clean[k] = x
        return _collect(files), clean

    def _save(self, step: int, entries: List[Tuple[str, Union[str, bytes]]], metrics: Dict[str, float]) -> Manifest:
        from boto3.s3.transfer import TransferConfig

        directory = _join(self.prefix, step_dir(step))
        manifest_key = _join(directory, MANIFEST_NAME)
        ref = ref_for(self.uri, step)
        self._delete(manifest_key)
        config = TransferConfig(use_threads=True, max_io_queue=2 * self._transfer["max_concurrency"],
                                **self._transfer)
        # Non-seekable sources are buffered part by part; bound how many parts wait.
        config.max_in_memory_upload_chunks = self._transfer["max_concurrency"] + 1
        when = self._clock()
        recorded: List[FileEntry] = []
        for name, src in entries:
            with (io.BytesIO(src) if isinstance(src, bytes) else open(src, "rb")) as f:
                reader = _HashingReader(f)
                try:
                    self.client.upload_fileobj(reader, self.bucket, _join(directory, name), Config=config)
                except Exception as e:
                    raise CheckpointError(f"save {ref}: file {name}: {e}") from e
            recorded.append(FileEntry(name=name, size=reader.size, sha256=reader.sha256.hexdigest()))
        m = Manifest(step=step, time=when, files=tuple(recorded), metrics=MappingProxyType(metrics), ref=ref)
        try:
            self.client.put_object(Bucket=self.bucket, Key=manifest_key, Body=m.to_json(),
                                   ContentType="application/json")
        except Exception as e:
            raise CheckpointError(f"save {ref}: manifest: {e}") from e
        return m

    # ---- read ----

    def list(self) -> List[Manifest]:
        """The manifests of every complete checkpoint, oldest step first."""
        return [self._read_manifest(self.bucket, self.prefix, self.uri, st.step)
                for st in self._scan() if st.complete]

    def latest(self) -> Optional[Manifest]:
        """The manifest of the newest complete checkpoint, or None when there is none. Its
        ref is what to resume from."""
        for st in reversed(self._scan()):
            if st.complete:
                return self._read_manifest(self.bucket, self.prefix, self.uri, st.step)
        return None

    def load(self, step_or_ref: Union[int, str, Manifest], dest: PathLike) -> Manifest:
        """Downloads a checkpoint (a step of this location, or any ref) into directory
        dest, checking every file's size and SHA-256 against the manifest; raises
        CorruptCheckpoint on a mismatch (the bad file is not left in dest) and NoCheckpoint
        when the step has no manifest. Returns the manifest."""
        if isinstance(step_or_ref, Manifest):
            step_or_ref = step_or_ref.ref
        if isinstance(step_or_ref, str):
            uri, step = parse_ref(step_or_ref)
        elif isinstance(step_or_ref, int) and not isinstance(step_or_ref, bool) and step_or_ref >= 0:
            uri, step = self.uri, step_or_ref
        else:
            raise ValueError(f"load: {step_or_ref!r} is neither a step nor a checkpoint ref")
        bucket, prefix = parse_uri(uri)
        ref = ref_for(uri, step)
        try:
            m = self._read_manifest(bucket, prefix, uri, step)
        except Exception as e:
            if _is_not_found(e):
                raise NoCheckpoint(f"no complete checkpoint at {ref}: no {MANIFEST_NAME} (incomplete or missing)") from None
            raise
        directory = _join(prefix, step_dir(step))
        os.makedirs(dest, exist_ok=True)
        for f in m.files:
            try:
                _check_file_name(f.name)
            except ValueError as e:
                raise CorruptCheckpoint(f"{ref}: {e}") from None
            self._download(bucket, _join(directory, f.name), ref, f, os.path.join(os.fspath(dest), *f.name.split("/")))
        return m

    def _download(self, bucket: str, key: str, ref: str, f: FileEntry, path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".opendlc-part"
        sha, size = hashlib.sha256(), 0
        try:
            try:
                body = self.client.get_object(Bucket=bucket, Key=key)["Body"]
            except Exception as e:
                if _is_not_found(e):
                    raise CorruptCheckpoint(f"{ref}: file {f.name} listed in the manifest is missing") from None
                raise
            with open(tmp, "wb") as out:
                while True:
                    chunk = body.read(_CHUNK)
                    if not chunk:
                        break
                    sha.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            if size != f.size or sha.hexdigest() != f.sha256:
                raise CorruptCheckpoint(
                    f"{ref}: file {f.name} has {size} bytes with sha256 {sha.hexdigest()}, "
                    f"the manifest says {f.size} bytes with sha256 {f.sha256}")
            os.replace(tmp, path)
        finally:
            _unlink(tmp)

    # ---- prune ----

    def prune(self, keep: int) -> List[int]:
        """Deletes the oldest complete checkpoints so that at most keep remain (keep <= 0
        keeps them all), and every incomplete step older than the newest complete one (a
        save that died); newer incomplete steps may be a save in progress and stay. A
        pruned step loses its manifest first. Returns the deleted steps, oldest first."""
        doomed: List[_StepObjects] = []
        complete = 0
        for st in reversed(self._scan()):  # newest first
            if st.complete:
                complete += 1
                if keep > 0 and complete > keep:
                    doomed.append(st)
            elif complete > 0:
                doomed.append(st)
        doomed.reverse()
        deleted: List[int] = []
        for st in doomed:
            self._delete_step(st)
            deleted.append(st.step)
        return deleted

    # ---- helpers ----

    def _scan(self) -> List[_StepObjects]:
        """Lists everything under the prefix and groups it by step, oldest first; names
        that are not all digits are ignored."""
        list_prefix = self.prefix + "/" if self.prefix else ""
        by_step: Dict[int, _StepObjects] = {}
        kwargs: Dict[str, Any] = {"Bucket": self.bucket, "Prefix": list_prefix}
        while True:
            page = self.client.list_objects_v2(**kwargs)
            for obj in page.get("Contents", ()):
                key: str = obj["Key"]
                d, _, rest = key[len(list_prefix):].partition("/")
                step = _parse_step(d)
                if step is None:
                    continue
                st = by_step.setdefault(step, _StepObjects(step))
                st.keys.append(key)
                if rest == MANIFEST_NAME and d == step_dir(step):
                    st.complete = True
            if not page.get("IsTruncated"):
                break
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
        return [by_step[s] for s in sorted(by_step)]

    def _read_manifest(self, bucket: str, prefix: str, uri: str, step: int) -> Manifest:
        key = _join(_join(prefix, step_dir(step)), MANIFEST_NAME)
        body = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        m = Manifest.from_json(body, ref=ref_for(uri, step))
        if m.step != step:
            raise CorruptCheckpoint(f"s3://{bucket}/{key}: manifest says step {m.step}")
        return m

    def _delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as e:
            if not _is_not_found(e):
                raise

    def _delete_step(self, st: _StepObjects) -> None:
        rest = []
        for key in st.keys:
            if key.endswith("/" + MANIFEST_NAME):
                self._delete(key)
            else:
                rest.append({"Key": key})
        while rest:
            batch, rest = rest[:1000], rest[1000:]  # the DeleteObjects limit
            out = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            for e in out.get("Errors", ()):
                if e.get("Code") != "NoSuchKey":
                    raise CheckpointError(f"prune {self.uri}: delete {e.get('Key')}: {e.get('Code')}: {e.get('Message')}")


# ---- the location of this replica (DLC_CHECKPOINT_URI) ----

_default: Optional[Checkpoints] = None
_default_lock = threading.Lock()


def default() -> Checkpoints:
    """The Checkpoints of DLC_CHECKPOINT_URI, with the S3 client of the environment."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Checkpoints()
        return _default


def save(step: int, files: Files, metrics: Optional[Mapping[str, float]] = None) -> Manifest:
    """Checkpoints.save on DLC_CHECKPOINT_URI."""
    return default().save(step, files, metrics)


def save_async(step: int, files: Files, metrics: Optional[Mapping[str, float]] = None,
               *, delete_after: bool = False) -> "Future[Manifest]":
    """Checkpoints.save_async on DLC_CHECKPOINT_URI."""
    return default().save_async(step, files, metrics, delete_after=delete_after)


def wait() -> List[Manifest]:
    """Checkpoints.wait on DLC_CHECKPOINT_URI."""
    return default().wait()


def list() -> List[Manifest]:  # noqa: A001 - the API's name
    """Checkpoints.list on DLC_CHECKPOINT_URI."""
    return default().list()


def latest() -> Optional[Manifest]:
    """Checkpoints.latest on DLC_CHECKPOINT_URI."""
    return default().latest()


def load(step_or_ref: Union[int, str, Manifest], dest: PathLike) -> Manifest:
    """Checkpoints.load on DLC_CHECKPOINT_URI."""
    return default().load(step_or_ref, dest)


def prune(keep: int) -> List[int]:
    """Checkpoints.prune on DLC_CHECKPOINT_URI."""
    return default().prune(keep)


def resume(dest: PathLike) -> Optional[Manifest]:
    """Loads the checkpoint named by DLC_RESUME_FROM into dest and returns its manifest;
    None on a fresh start (DLC_RESUME_FROM empty)."""
    ref = _env.env().resume_from
    if not ref:
        return None
    return Checkpoints(parse_ref(ref)[0]).load(ref, dest)
