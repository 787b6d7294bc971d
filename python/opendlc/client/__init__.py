"""``opendlc.client``: the Python client of OpenDLC's HTTP API, for notebooks, scripts
and pipelines that submit, follow and tune training jobs (what the ``dlc`` CLI does).

    from opendlc.client import Client
    dlc = Client()                                   # $DLC_SERVER / $DLC_TOKEN, as dlc
    job = dlc.jobs.submit(pathlib.Path("job.yaml"))   # or a dict, or YAML text
    for rec in dlc.jobs.logs(job.name, follow=True):
        print(rec.line)
    print(dlc.jobs.wait(job.name).phase)

It needs Debian's python3-requests (else it falls back to the standard library's
urllib); python3-tqdm gives wait() a progress bar and python3-pandas experiment results
as a DataFrame, each when installed. See docs/python.md."""

from . import models
from ._client import Client, Spec, Stream
from .config import Config, default_state_dir, resolve
from .errors import (AlreadyExistsError, APIError, ConfigError, ConflictError, FailedPreconditionError, FieldError,
                     InvalidRequestError, InvalidSpecError, NotFoundError, OpenDLCError, PermissionDeniedError,
                     RateLimitedError, RequestTooLargeError, ServerError, TransportError, UnauthenticatedError,
                     UnavailableError, WaitTimeout)
from .models import (CohortMember, CohortStatus, CreatedToken, Event, Experiment, ExperimentSummary, Identity, Job,
                     JobSummary, Lineage, LogRecord, Node, NotificationRule, Page, PipelineRun, PipelineSummary, Quota,
                     QuotaJob, QuotaLimit, QuotaPreemption, QuotaPreemptionInfo, QuotaStatus, QuotaUsage, RunRecord,
                     Schedule, ScheduleRun, ScheduleSummary, Token, Trigger, TrialList, TrialStatus, Usage, UsageRow,
                     Workspace)

__all__ = [
    "Client", "Spec", "Stream", "Config", "default_state_dir", "resolve", "models",
    "OpenDLCError", "APIError", "InvalidRequestError", "InvalidSpecError", "UnauthenticatedError",
    "PermissionDeniedError", "NotFoundError", "ConflictError", "AlreadyExistsError", "FailedPreconditionError",
    "RequestTooLargeError", "RateLimitedError", "ServerError", "UnavailableError", "TransportError",
    "ConfigError", "WaitTimeout", "FieldError",
    "CreatedToken", "Event", "Experiment", "ExperimentSummary", "Identity", "Job", "JobSummary", "LogRecord",
    "Node", "NotificationRule", "Page", "PipelineRun", "PipelineSummary", "Quota", "QuotaStatus", "Schedule",
    "ScheduleRun", "ScheduleSummary", "Token", "Trigger", "TrialList", "TrialStatus", "Workspace",
    "Lineage", "RunRecord", "Usage", "UsageRow", "QuotaJob", "QuotaLimit", "QuotaPreemption", "QuotaPreemptionInfo",
    "QuotaUsage", "CohortMember", "CohortStatus",
]
