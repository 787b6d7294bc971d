"""Typed views of the API's answers (api/ and schemas/ in Go). Each model is a frozen
dataclass with the answer's fields in snake_case, times as timezone-aware datetimes, and
``raw``: the answer's JSON object as the server sent it (fields this version of the
client does not know stay reachable there). Specs (``Job.spec``, ``Experiment.spec``...)
are the documents as submitted, plain dicts in the server's camelCase: the same shape as
the YAML files ``dlc`` reads."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Generic, Iterator, List, Mapping, Optional, TypeVar

__all__ = [
    "parse_time", "JOB_TERMINAL", "EXPERIMENT_TERMINAL", "PIPELINE_TERMINAL",
    "Identity", "Token", "CreatedToken", "Workspace", "Quota", "QuotaLimit", "QuotaPreemption", "QuotaUsage",
    "QuotaPreemptionInfo", "QuotaJob", "CohortMember", "CohortStatus", "QuotaStatus", "ValidateResult",
    "ReplicaStatus", "JobStatus", "Job", "JobSummary",
    "StopResult", "ScaleResult", "LogRecord", "Event", "TrialStatus", "ExperimentStatus",
    "Experiment", "ExperimentSummary", "ExperimentActionResult", "TrialList", "ScheduleRun",
    "ScheduleStatus", "Schedule", "ScheduleSummary", "StepStatus", "PipelineStatus",
    "PipelineRun", "PipelineSummary", "Trigger", "NotificationRule", "Node", "Page",
    "RunOrigin", "RunAttempt", "RunRecord", "Lineage", "UsageRow", "Usage",
]

JOB_TERMINAL = frozenset({"Succeeded", "Failed", "Stopped"})
# An experiment that is Stopped may be resumed: only Succeeded and Failed are final.
EXPERIMENT_TERMINAL = frozenset({"Succeeded", "Failed"})
PIPELINE_TERMINAL = frozenset({"Succeeded", "Failed", "Stopped"})

_TIME_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_time(v: Any) -> Optional[datetime]:
    """An RFC 3339 time as Go writes it (nanoseconds, Z) as an aware datetime; None for
    none (and for Go's zero time)."""
    if not v or not isinstance(v, str):
        return None
    m = _TIME_RE.match(v)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {v!r}")
    base, frac, tz = m.groups()
    t = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    if frac:
        t = t.replace(microsecond=int((frac + "000000")[:6]))
    if tz == "Z":
        t = t.replace(tzinfo=timezone.utc)
    else:
        sign = 1 if tz[0] == "+" else -1
        t = t.replace(tzinfo=timezone(sign * timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))))
    if t.year <= 1:
        return None
    return t


def _list(d: Mapping[str, Any], key: str) -> List[Any]:
    v = d.get(key)
    return list(v) if isinstance(v, list) else []


def _dict(d: Mapping[str, Any], key: str) -> Dict[str, Any]:
    v = d.get(key)
    return dict(v) if isinstance(v, dict) else {}


def _meta(spec: Mapping[str, Any]) -> Dict[str, Any]:
    return _dict(spec, "metadata")


# --- access ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Identity:
    """The identity of a token (GET /v1/whoami)."""
    name: str
    workspace: str
    role: str
    expires_at: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Identity":
        return cls(d.get("name", ""), d.get("workspace", ""), d.get("role", ""), parse_time(d.get("expiresAt")), dict(d))


@dataclass(frozen=True)
class Token:
    """A token without its secret."""
    name: str
    workspace: str
    role: str
    expires_at: Optional[datetime]
    created_at: Optional[datetime]
    created_by: str
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Token":
        return cls(d.get("name", ""), d.get("workspace", ""), d.get("role", ""), parse_time(d.get("expiresAt")),
                   parse_time(d.get("createdAt")), d.get("createdBy", ""), dict(d))


@dataclass(frozen=True)
class CreatedToken(Token):
    """A token just created, with its secret: the server does not keep it, so this is
    the only time it is shown."""
    secret: str = field(default="", repr=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CreatedToken":
        t = Token.from_dict(d)
        return cls(t.name, t.workspace, t.role, t.expires_at, t.created_at, t.created_by, dict(d), d.get("secret", ""))


@dataclass(frozen=True)
class Workspace:
    name: str
    namespace: str
    description: str
    storage_locations: List[str]
    pod_defaults: Dict[str, Any]
    created_at: Optional[datetime]
    created_by: str
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Workspace":
        return cls(d.get("name", ""), d.get("namespace", ""), d.get("description", ""),
                   _list(_dict(d, "storage"), "locations"), _dict(d, "podDefaults"),
                   parse_time(d.get("createdAt")), d.get("createdBy", ""), dict(d))


# --- quota ----------------------------------------------------------------------------

def _models(d: Mapping[str, Any]) -> Dict[str, int]:
    return {str(k): int(v) for k, v in _dict(d, "gpuModels").items()}


@dataclass(frozen=True)
class QuotaLimit:
    """A borrowing or lending limit: None (gpu) or "" (cpu, memory) for a resource it
    does not bound; gpu_models bound the GPUs of each accelerator model."""
    gpu: Optional[int]
    cpu: str
    memory: str
    gpu_models: Dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuotaLimit":
        gpu = d.get("gpu")
        return cls(int(gpu) if gpu is not None else None, str(d.get("cpu", "")), str(d.get("memory", "")), _models(d))

    def to_dict(self) -> Dict[str, Any]:
        """The limit as the API writes it."""
        out: Dict[str, Any] = {}
        if self.gpu is not None:
            out["gpu"] = int(self.gpu)
        if self.cpu:
            out["cpu"] = str(self.cpu)
        if self.memory:
            out["memory"] = str(self.memory)
        if self.gpu_models:
            out["gpuModels"] = {str(k): int(v) for k, v in self.gpu_models.items()}
        return out


@dataclass(frozen=True)
class QuotaPreemption:
    """What a workspace's queued jobs may preempt: reclaim_within_cohort is "Any",
    "LowerPriority" or "Never" ("" for the default, Any); within_workspace is "Never" or
    "LowerPriority" ("" for the default, Never)."""
    reclaim_within_cohort: str
    within_workspace: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuotaPreemption":
        return cls(str(d.get("reclaimWithinCohort", "")), str(d.get("withinWorkspace", "")))


@dataclass(frozen=True)
class Quota:
    """A workspace's limits: None (gpu) or "" (cpu, memory) for unlimited. CPU and memory
    are Kubernetes quantities as strings ("8", "500m", "64Gi"). gpu, cpu, memory and
    gpu_models are the nominal quota; in a cohort (cohort != "") the workspace borrows
    what the other members leave idle, within borrowing_limit, and lends its own, within
    lending_limit. weight is 0 for the default, 1."""
    gpu: Optional[int]
    cpu: str
    memory: str
    raw: Dict[str, Any] = field(repr=False, compare=False)
    gpu_models: Dict[str, int] = field(default_factory=dict)
    cohort: str = ""
    borrowing_limit: Optional[QuotaLimit] = None
    lending_limit: Optional[QuotaLimit] = None
    weight: int = 0
    preemption: Optional[QuotaPreemption] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Quota":
        gpu = d.get("gpu")
        b, lend, p = d.get("borrowingLimit"), d.get("lendingLimit"), d.get("preemption")
        return cls(int(gpu) if gpu is not None else None, str(d.get("cpu", "")), str(d.get("memory", "")), dict(d),
                   _models(d), str(d.get("cohort", "")),
                   QuotaLimit.from_dict(b) if isinstance(b, dict) else None,
                   QuotaLimit.from_dict(lend) if isinstance(lend, dict) else None,
                   int(d.get("weight", 0) or 0), QuotaPreemption.from_dict(p) if isinstance(p, dict) else None)


@dataclass(frozen=True)
class QuotaUsage:
    gpu: int
    cpu: str
    memory: str
    gpu_models: Dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuotaUsage":
        return cls(int(d.get("gpu", 0) or 0), str(d.get("cpu", "0") or "0"), str(d.get("memory", "0") or "0"), _models(d))


@dataclass(frozen=True)
class QuotaPreemptionInfo:
    """Who takes a preempted job's capacity (job ``by`` of workspace ``workspace``) and
    why: reason is "Reclaimed" or "PreemptedByPriority"."""
    by: str
    workspace: str
    reason: str
    since: Optional[datetime]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuotaPreemptionInfo":
        return cls(str(d.get("by", "")), str(d.get("workspace", "")), str(d.get("reason", "")), parse_time(d.get("since")))


@dataclass(frozen=True)
class QuotaJob:
    """A job admitted against, or queued for, the quota. borrowing: admitted beyond the
    nominal quota on what the cohort's other members leave idle; preempting (admitted):
    it is being preempted; waiting_for (queued): the jobs it preempts, admitted once they
    have stopped."""
    job: str
    priority: int
    resources: QuotaUsage
    since: Optional[datetime]
    borrowing: bool = False
    preempting: Optional[QuotaPreemptionInfo] = None
    waiting_for: List[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuotaJob":
        p = d.get("preempting")
        return cls(d.get("job", ""), int(d.get("priority", 0) or 0), QuotaUsage.from_dict(_dict(d, "resources")),
                   parse_time(d.get("since")), bool(d.get("borrowing")),
                   QuotaPreemptionInfo.from_dict(p) if isinstance(p, dict) else None,
                   [str(v) for v in _list(d, "waitingFor")])


@dataclass(frozen=True)
class CohortMember:
    """One workspace's figures in its cohort; share is its weighted dominant share of
    borrowed capacity (idle capacity goes to the lowest first)."""
    workspace: str
    nominal: QuotaUsage
    used: QuotaUsage
    borrowed: QuotaUsage
    lent: QuotaUsage
    weight: int
    share: float
    admitted: int
    queued: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CohortMember":
        return cls(str(d.get("workspace", "")), QuotaUsage.from_dict(_dict(d, "nominal")),
                   QuotaUsage.from_dict(_dict(d, "used")),
                   QuotaUsage.from_dict(_dict(d, "borrowed")), QuotaUsage.from_dict(_dict(d, "lent")),
                   int(d.get("weight", 0) or 0), float(d.get("share", 0) or 0), int(d.get("admitted", 0) or 0),
                   int(d.get("queued", 0) or 0))


@dataclass(frozen=True)
class CohortStatus:
    """A cohort: pool is what its members lend, borrowed what they use of each
    other's."""
    name: str
    pool: QuotaUsage
    borrowed: QuotaUsage
    members: List[CohortMember]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CohortStatus":
        return cls(str(d.get("name", "")), QuotaUsage.from_dict(_dict(d, "pool")),
                   QuotaUsage.from_dict(_dict(d, "borrowed")),
                   [CohortMember.from_dict(m) for m in _list(d, "members")])


@dataclass(frozen=True)
class QuotaStatus:
    """A workspace's quota, what its admitted jobs use, and the queue (in admission
    order). borrowed is what the workspace uses beyond its nominal quota, lent what the
    cohort's other members use of it (both zero outside a cohort); cohort is the
    workspace's cohort with every member's figures, None outside one."""
    workspace: str
    limits: Quota
    used: QuotaUsage
    admitted: List[QuotaJob]
    queue: List[QuotaJob]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    borrowed: QuotaUsage = field(default_factory=lambda: QuotaUsage(0, "0", "0"))
    lent: QuotaUsage = field(default_factory=lambda: QuotaUsage(0, "0", "0"))
    cohort: Optional[CohortStatus] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "QuotaStatus":
        c = d.get("cohort")
        return cls(d.get("workspace", ""), Quota.from_dict(_dict(d, "limits")), QuotaUsage.from_dict(_dict(d, "used")),
                   [QuotaJob.from_dict(j) for j in _list(d, "admitted")],
                   [QuotaJob.from_dict(j) for j in _list(d, "queue")], dict(d),
                   QuotaUsage.from_dict(_dict(d, "borrowed")), QuotaUsage.from_dict(_dict(d, "lent")),
                   CohortStatus.from_dict(c) if isinstance(c, dict) else None)


@dataclass(frozen=True)
class ValidateResult:
    valid: bool
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ValidateResult":
        return cls(bool(d.get("valid")), dict(d))


# --- jobs -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaStatus:
    name: str
    role: str
    index: int
    phase: str
    exit_code: Optional[int]
    node: str
    reason: str
    message: str
    start_time: Optional[datetime]
    finish_time: Optional[datetime]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ReplicaStatus":
        return cls(d.get("name", ""), d.get("role", ""), int(d.get("index", 0)), d.get("phase", ""), d.get("exitCode"),
                   d.get("node", ""), d.get("reason", ""), d.get("message", ""), parse_time(d.get("startTime")),
                   parse_time(d.get("finishTime")))


@dataclass(frozen=True)
class JobStatus:
    phase: str
    reason: str
    message: str
    attempt: int
    exit_code: Optional[int]
    replicas: List[ReplicaStatus]
    conditions: List[Dict[str, Any]]
    last_checkpoint: str
    start_time: Optional[datetime]
    finish_time: Optional[datetime]
    restarts: int
    metrics: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        return self.phase in JOB_TERMINAL

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JobStatus":
        return cls(d.get("phase", ""), d.get("reason", ""), d.get("message", ""), int(d.get("attempt", 0) or 0),
                   d.get("exitCode"), [ReplicaStatus.from_dict(r) for r in _list(d, "replicas")], _list(d, "conditions"),
                   d.get("lastCheckpoint", ""), parse_time(d.get("startTime")), parse_time(d.get("finishTime")),
                   int(d.get("restarts", 0) or 0), _dict(d, "metrics"), dict(d))


@dataclass(frozen=True)
class Job:
    """A job: its spec as submitted (a TrainingJob document) and its live status."""
    uid: str
    spec: Dict[str, Any]
    status: JobStatus
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return _meta(self.spec).get("name", "")

    @property
    def workspace(self) -> str:
        return _meta(self.spec).get("workspace", "")

    @property
    def phase(self) -> str:
        return self.status.phase

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Job":
        return cls(d.get("uid", ""), _dict(d, "spec"), JobStatus.from_dict(_dict(d, "status")), dict(d))


@dataclass(frozen=True)
class JobSummary:
    name: str
    workspace: str
    uid: str
    phase: str
    framework: str
    start_time: Optional[datetime]
    end_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JobSummary":
        return cls(d.get("name", ""), d.get("workspace", ""), d.get("uid", ""), d.get("phase", ""), d.get("framework", ""),
                   parse_time(d.get("startTime")), parse_time(d.get("endTime")), dict(d))


@dataclass(frozen=True)
class StopResult:
    phase: str
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StopResult":
        return cls(d.get("phase", ""), dict(d))


@dataclass(frozen=True)
class ScaleResult:
    desired_replicas: int
    current_replicas: int
    phase: str
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ScaleResult":
        return cls(int(d.get("desiredReplicas", 0)), int(d.get("currentReplicas", 0)), d.get("phase", ""), dict(d))


@dataclass(frozen=True)
class LogRecord:
    """One line a replica wrote."""
    workspace: str
    job: str
    uid: str
    attempt: int
    role: str
    index: int
    replica: str
    node: str
    stream: str
    seq: int
    time: Optional[datetime]
    line: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LogRecord":
        return cls(d.get("workspace", ""), d.get("job", ""), d.get("uid", ""), int(d.get("attempt", 0) or 0),
                   d.get("role", ""), int(d.get("index", 0) or 0), d.get("replica", ""), d.get("node", ""),
                   d.get("stream", ""), int(d.get("seq", 0) or 0), parse_time(d.get("time")), d.get("line", ""))

    def __str__(self) -> str:
        return self.line


@dataclass(frozen=True)
class Event:
    """A CloudEvent of a workspace (docs/events.md): ``type`` such as
    ``opendlc.job.phase.v1``, ``subject`` the object's name, ``data`` its payload."""
    id: str
    type: str
    source: str
    subject: str
    time: Optional[datetime]
    workspace: str
    data: Any
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Event":
        return cls(d.get("id", ""), d.get("type", ""), d.get("source", ""), d.get("subject", ""),
                   parse_time(d.get("time")), d.get("workspace", ""), d.get("data"), dict(d))


# --- experiments ----------------------------------------------------------------------

@dataclass(frozen=True)
class TrialStatus:
    """One trial: its parameters, phase, objective value and reports."""
    id: int
    job: str
    phase: str
    params: Dict[str, Any]
    value: Optional[float]
    values: Dict[str, float]
    step: int
    attempts: int
    message: str
    reports: List[Dict[str, Any]]
    start_time: Optional[datetime]
    finish_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    # With spec.constraints: each constraint metric's last value, and whether a
    # completed trial met them all (None while unknown or without constraints).
    constraints: Dict[str, float] = field(default_factory=dict)
    feasible: Optional[bool] = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrialStatus":
        return cls(int(d.get("id", 0)), d.get("job", ""), d.get("phase", ""), _dict(d, "params"), d.get("value"),
                   _dict(d, "values"), int(d.get("step", 0) or 0), int(d.get("attempts", 0) or 0), d.get("message", ""),
                   _list(d, "reports"), parse_time(d.get("startTime")), parse_time(d.get("finishTime")), dict(d),
                   constraints=_dict(d, "constraints"), feasible=d.get("feasible"))


@dataclass(frozen=True)
class ExperimentStatus:
    phase: str
    reason: str
    message: str
    seed: int
    max_trials: int
    trials: List[TrialStatus]
    best_trial: Optional[int]
    best_value: Optional[float]
    best_params: Dict[str, Any]
    pareto_front: List[int]
    running: int
    completed: int
    pruned: int
    failed: int
    start_time: Optional[datetime]
    finish_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    # The enqueued parameter sets not yet run, in the order they will run.
    queued: List[Dict[str, Any]] = field(default_factory=list)
    # With spec.warmStart: {"trials": N, "notes": [...]}, what the algorithm took from
    # the earlier experiments.
    warm_start: Optional[Dict[str, Any]] = None

    @property
    def terminal(self) -> bool:
        return self.phase in EXPERIMENT_TERMINAL

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ExperimentStatus":
        return cls(d.get("phase", ""), d.get("reason", ""), d.get("message", ""), int(d.get("seed", 0) or 0),
                   int(d.get("maxTrials", 0) or 0), [TrialStatus.from_dict(t) for t in _list(d, "trials")],
                   d.get("bestTrial"), d.get("bestValue"), _dict(d, "bestParams"), _list(d, "paretoFront"),
                   int(d.get("running", 0) or 0), int(d.get("completed", 0) or 0), int(d.get("pruned", 0) or 0),
                   int(d.get("failed", 0) or 0), parse_time(d.get("startTime")), parse_time(d.get("finishTime")), dict(d),
                   queued=_list(d, "queued"), warm_start=d.get("warmStart"))


def trials_records(trials: List[TrialStatus]) -> List[Dict[str, Any]]:
    """One flat row per trial: trial, job, phase, value, step, attempts, then each
    parameter as ``param.NAME`` and each objective as ``value.NAME``."""
    rows = []
    for t in trials:
        row: Dict[str, Any] = {"trial": t.id, "job": t.job, "phase": t.phase, "value": t.value,
                               "step": t.step, "attempts": t.attempts,
                               "start_time": t.start_time, "finish_time": t.finish_time}
        for k, v in sorted(t.params.items()):
            row["param." + k] = v
        for k, v in sorted(t.values.items()):
            row["value." + k] = v
        rows.append(row)
    return rows


def records_frame(rows: List[Dict[str, Any]]) -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("experiment results as a DataFrame need pandas (Debian package python3-pandas); "
                          "without it, use .records()") from None
    cols = ["trial", "job", "phase", "value", "step", "attempts", "start_time", "finish_time"]
    extra = sorted({k for r in rows for k in r} - set(cols))
    frame = pd.DataFrame(rows, columns=cols + extra)
    return frame.set_index("trial")


@dataclass(frozen=True)
class Experiment:
    """An HPO experiment: its spec and live status (every trial, the best)."""
    uid: str
    spec: Dict[str, Any]
    status: ExperimentStatus
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return _meta(self.spec).get("name", "")

    @property
    def workspace(self) -> str:
        return _meta(self.spec).get("workspace", "")

    @property
    def phase(self) -> str:
        return self.status.phase

    @property
    def trials(self) -> List[TrialStatus]:
        return self.status.trials

    def records(self) -> List[Dict[str, Any]]:
        """The trials as flat rows (see trials_records); needs no pandas."""
        return trials_records(self.status.trials)

    def to_dataframe(self) -> Any:
        """The trials as a pandas DataFrame indexed by trial ID (pandas needed)."""
        return records_frame(self.records())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Experiment":
        return cls(d.get("uid", ""), _dict(d, "spec"), ExperimentStatus.from_dict(_dict(d, "status")), dict(d))


@dataclass(frozen=True)
class _RunSummary:
    """One row of a list of runs that have a phase and a start and end time (experiments,
    pipeline runs)."""
    name: str
    workspace: str
    uid: str
    phase: str
    start_time: Optional[datetime]
    end_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        return cls(d.get("name", ""), d.get("workspace", ""), d.get("uid", ""), d.get("phase", ""),
                   parse_time(d.get("startTime")), parse_time(d.get("endTime")), dict(d))


class ExperimentSummary(_RunSummary):
    """One row of an experiment list."""


@dataclass(frozen=True)
class ExperimentActionResult:
    phase: str
    max_trials: int
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ExperimentActionResult":
        return cls(d.get("phase", ""), int(d.get("maxTrials", 0) or 0), dict(d))


@dataclass(frozen=True)
class TrialList:
    experiment: str
    uid: str
    items: List[TrialStatus]
    best_trial: Optional[int]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    def __iter__(self) -> Iterator[TrialStatus]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def records(self) -> List[Dict[str, Any]]:
        return trials_records(self.items)

    def to_dataframe(self) -> Any:
        return records_frame(self.records())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrialList":
        return cls(d.get("experiment", ""), d.get("uid", ""), [TrialStatus.from_dict(t) for t in _list(d, "items")],
                   d.get("bestTrial"), dict(d))


# --- schedules ------------------------------------------------------------------------

@dataclass(frozen=True)
class ScheduleRun:
    """One run a schedule started (or skipped): its nominal time, trigger, job, outcome."""
    nominal_time: Optional[datetime]
    trigger: str
    kind: str
    job: str
    outcome: str
    message: str
    start_time: Optional[datetime]
    finish_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ScheduleRun":
        return cls(parse_time(d.get("nominalTime")), d.get("trigger", ""), d.get("kind", ""), d.get("job", ""),
                   d.get("outcome", ""), d.get("message", ""), parse_time(d.get("startTime")),
                   parse_time(d.get("finishTime")), dict(d))


@dataclass(frozen=True)
class ScheduleStatus:
    paused: bool
    pause_note: str
    create_time: Optional[datetime]
    next: List[Dict[str, Any]]
    running: List[ScheduleRun]
    history: List[ScheduleRun]
    counts: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ScheduleStatus":
        return cls(bool(d.get("paused")), d.get("pauseNote", ""), parse_time(d.get("createTime")), _list(d, "next"),
                   [ScheduleRun.from_dict(r) for r in _list(d, "running")],
                   [ScheduleRun.from_dict(r) for r in _list(d, "history")], _dict(d, "counts"), dict(d))


@dataclass(frozen=True)
class Schedule:
    spec: Dict[str, Any]
    status: ScheduleStatus
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return _meta(self.spec).get("name", "")

    @property
    def workspace(self) -> str:
        return _meta(self.spec).get("workspace", "")

    @property
    def paused(self) -> bool:
        return self.status.paused

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Schedule":
        return cls(_dict(d, "spec"), ScheduleStatus.from_dict(_dict(d, "status")), dict(d))


@dataclass(frozen=True)
class ScheduleSummary:
    name: str
    workspace: str
    cron: str
    time_zone: str
    paused: bool
    create_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ScheduleSummary":
        return cls(d.get("name", ""), d.get("workspace", ""), d.get("cron", ""), d.get("timeZone", ""),
                   bool(d.get("paused")), parse_time(d.get("createTime")), dict(d))


# --- pipelines, triggers, rules -------------------------------------------------------

@dataclass(frozen=True)
class StepStatus:
    name: str
    phase: str
    reason: str
    message: str
    job: str
    condition_result: Optional[bool]
    outputs: Dict[str, str]
    metrics: Dict[str, Any]
    start_time: Optional[datetime]
    finish_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StepStatus":
        return cls(d.get("name", ""), d.get("phase", ""), d.get("reason", ""), d.get("message", ""), d.get("job", ""),
                   d.get("conditionResult"), _dict(d, "outputs"), _dict(d, "metrics"),
                   parse_time(d.get("startTime")), parse_time(d.get("finishTime")), dict(d))


@dataclass(frozen=True)
class PipelineStatus:
    phase: str
    reason: str
    message: str
    params: Dict[str, str]
    steps: List[StepStatus]
    start_time: Optional[datetime]
    finish_time: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        return self.phase in PIPELINE_TERMINAL

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PipelineStatus":
        return cls(d.get("phase", ""), d.get("reason", ""), d.get("message", ""), _dict(d, "params"),
                   [StepStatus.from_dict(s) for s in _list(d, "steps")], parse_time(d.get("startTime")),
                   parse_time(d.get("finishTime")), dict(d))


@dataclass(frozen=True)
class PipelineRun:
    """A run of a pipeline: the pipeline and the live status of every step."""
    uid: str
    spec: Dict[str, Any]
    status: PipelineStatus
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return _meta(self.spec).get("name", "")

    @property
    def workspace(self) -> str:
        return _meta(self.spec).get("workspace", "")

    @property
    def phase(self) -> str:
        return self.status.phase

    def step(self, name: str) -> StepStatus:
        for s in self.status.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PipelineRun":
        return cls(d.get("uid", ""), _dict(d, "spec"), PipelineStatus.from_dict(_dict(d, "status")), dict(d))


class PipelineSummary(_RunSummary):
    """One row of a pipeline run list."""


@dataclass(frozen=True)
class _Document:
    """A stored document (a Trigger, a NotificationRule): apiVersion, kind, metadata,
    spec as the server keeps it."""
    kind: str
    name: str
    workspace: str
    labels: Dict[str, str]
    spec: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):  # type: ignore[no-untyped-def]
        m = _meta(d)
        return cls(d.get("kind", ""), m.get("name", ""), m.get("workspace", ""), dict(m.get("labels") or {}),
                   _dict(d, "spec"), dict(d))


class Trigger(_Document):
    """A trigger: a subject of NATS events, a filter and the action it starts."""


class NotificationRule(_Document):
    """A notification rule, its webhook secret redacted."""


@dataclass(frozen=True)
class Node:
    """A node's latest health verdict and quarantine state."""
    name: str
    status: str
    quarantined: bool
    checked_at: Optional[datetime]
    job: str
    checks: List[Dict[str, Any]]
    verdicts: int
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Node":
        return cls(d.get("name", ""), d.get("status", ""), bool(d.get("quarantined")), parse_time(d.get("checkedAt")),
                   d.get("job", ""), _list(d, "checks"), int(d.get("verdicts", 0) or 0), dict(d))


# --- run records (GET /v1/workspaces/{ws}/history, lineage, /v1/usage) ---------------

@dataclass(frozen=True)
class RunOrigin:
    """What started a run: kind User, Schedule, Trigger, Pipeline or Experiment, and
    the schedule's, trigger's, pipeline's or experiment's name; event is a trigger's
    event id, step a pipeline step, trial an experiment's trial number."""
    kind: str
    name: str
    event: str
    step: str
    trial: Optional[int]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunOrigin":
        trial = d.get("trial")
        return cls(d.get("kind", ""), d.get("name", ""), d.get("event", ""), d.get("step", ""),
                   None if trial is None else int(trial))


@dataclass(frozen=True)
class RunAttempt:
    """One attempt of a job run: when and where it ran and how it ended."""
    attempt: int
    start: Optional[datetime]
    end: Optional[datetime]
    outcome: str
    reason: str
    message: str
    nodes: List[str]
    resumed_from: str

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunAttempt":
        return cls(int(d.get("attempt", 0) or 0), parse_time(d.get("start")), parse_time(d.get("end")),
                   d.get("outcome", ""), d.get("reason", ""), d.get("message", ""), _list(d, "nodes"),
                   d.get("resumedFrom", ""))


@dataclass(frozen=True)
class RunRecord:
    """A finished job, experiment or pipeline run, kept after Temporal forgets it: its
    spec as it ran, attempts, final metrics, last checkpoint, inputs, image, who
    submitted it and what started it. ``demand`` is what its replicas held together
    (gpu, cpu cores, memoryBytes); ``spec`` and ``result`` are plain dicts."""
    workspace: str
    kind: str
    name: str
    uid: str
    phase: str
    reason: str
    message: str
    labels: Dict[str, str]
    submitted_by: str
    origin: RunOrigin
    parent: str
    submitted: Optional[datetime]
    started: Optional[datetime]
    finished: Optional[datetime]
    image: str
    digest: str
    inputs: List[str]
    checkpoint: str
    outputs: Dict[str, str]
    metrics: Dict[str, float]
    attempts: List[RunAttempt]
    demand: Dict[str, Any]
    spec: Any
    result: Any
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @property
    def duration(self) -> Optional[timedelta]:
        """From start to finish; None for a run that never started."""
        if self.started is None or self.finished is None:
            return None
        return self.finished - self.started

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunRecord":
        return cls(d.get("workspace", ""), d.get("kind", ""), d.get("name", ""), d.get("uid", ""), d.get("phase", ""),
                   d.get("reason", ""), d.get("message", ""), _dict(d, "labels"), d.get("submittedBy", ""),
                   RunOrigin.from_dict(_dict(d, "origin")), d.get("parent", ""), parse_time(d.get("submitted")),
                   parse_time(d.get("started")), parse_time(d.get("finished")), d.get("image", ""), d.get("digest", ""),
                   _list(d, "inputs"), d.get("checkpoint", ""), _dict(d, "outputs"),
                   {k: float(v) for k, v in _dict(d, "metrics").items()},
                   [RunAttempt.from_dict(a) for a in _list(d, "attempts")], _dict(d, "demand"),
                   d.get("spec"), d.get("result"), dict(d))


@dataclass(frozen=True)
class Lineage:
    """The runs of a checkpoint's or a schedule's lineage, newest first; truncated when
    there were more than one answer holds. Iterating it iterates the records."""
    records: List[RunRecord]
    truncated: bool

    def __iter__(self) -> Iterator[RunRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Lineage":
        return cls([RunRecord.from_dict(r) for r in _list(d, "records")], bool(d.get("truncated")))


@dataclass(frozen=True)
class UsageRow:
    """One workspace's (and label value's) resource-hours on one UTC day."""
    workspace: str
    day: str
    label: str
    gpu_hours: float
    cpu_hours: float
    memory_gib_hours: float
    runs: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "UsageRow":
        return cls(d.get("workspace", ""), d.get("day", ""), d.get("label", ""), float(d.get("gpuHours", 0) or 0),
                   float(d.get("cpuHours", 0) or 0), float(d.get("memoryGiBHours", 0) or 0), int(d.get("runs", 0) or 0))


@dataclass(frozen=True)
class Usage:
    """Resource-hours over [start, end) (``from`` and ``to`` in the API), a row per
    workspace, day (and label value). Iterating it iterates the rows."""
    start: Optional[datetime]
    end: Optional[datetime]
    rows: List[UsageRow]

    def __iter__(self) -> Iterator[UsageRow]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Usage":
        return cls(parse_time(d.get("from")), parse_time(d.get("to")), [UsageRow.from_dict(r) for r in _list(d, "rows")])


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """A page of a list: ``items`` and ``next_page_token`` ("" on the last page).
    Iterating a page iterates its items."""
    items: List[T]
    next_page_token: str = ""

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> T:
        return self.items[i]
