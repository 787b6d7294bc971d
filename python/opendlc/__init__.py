"""OpenDLC's library for training code: the replica's environment, metric reports,
checkpoints in the layout the control plane reads, and a final checkpoint on a stop
signal (opendlc.preemption). See docs/python.md."""

from .checkpoint import (
    Checkpoints,
    CheckpointError,
    CorruptCheckpoint,
    FileEntry,
    InvalidURI,
    Manifest,
    NoCheckpoint,
    latest,
    list,
    load,
    parse_ref,
    parse_uri,
    prune,
    ref_for,
    resume,
    save,
    save_async,
    wait,
)
from .environment import DataSource, Env, Rendezvous, S3Config, env
from .metrics import print_line, report
from .preemption import Notice, on_notice

__all__ = [
    "Checkpoints", "CheckpointError", "CorruptCheckpoint", "DataSource", "Env", "FileEntry", "InvalidURI",
    "Manifest", "NoCheckpoint", "Notice", "Rendezvous", "S3Config", "env", "latest", "list", "load", "on_notice",
    "parse_ref", "parse_uri", "print_line", "prune", "ref_for", "report", "resume", "save", "save_async", "wait",
]
__version__ = "0.1.0"
