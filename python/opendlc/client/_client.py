"""The client: one object per server, with one attribute per kind (``jobs``,
``experiments``, ``schedules``, ``pipelines``, ``triggers``, ``rules``, ``workspaces``,
``tokens``, ``quota``, ``nodes``) whose methods are the API's routes
(api/server/routes.go), as the Go SDK (client/) calls them."""

from __future__ import annotations

import json
import os
import time
import urllib.parse
from datetime import datetime, timedelta, timezone
from typing import (Any, Callable, Dict, Generic, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    TypeVar, Union)

from . import models as m
from .config import resolve
from .errors import OpenDLCError, WaitTimeout, error_from_response
from .progress import Progress
from .transport import Response, Transport, default_transport

__all__ = ["Client", "Stream", "Spec"]

# A document of any kind: a dict (sent as JSON), YAML or JSON text (str or bytes), or
# the path of a file holding one (pathlib.Path or any os.PathLike).
Spec = Union[Mapping[str, Any], str, bytes, "os.PathLike[str]"]

T = TypeVar("T")
USER_AGENT = "opendlc-python-client/0.1"


def _spec_body(spec: Spec) -> Tuple[bytes, str]:
    if isinstance(spec, os.PathLike):
        with open(spec, "rb") as f:
            spec = f.read()
    if isinstance(spec, Mapping):
        return json.dumps(spec).encode("utf-8"), "application/json"
    if isinstance(spec, str):
        spec = spec.encode("utf-8")
    if isinstance(spec, (bytes, bytearray)):
        try:
            json.loads(spec)
            return bytes(spec), "application/json"
        except ValueError:
            return bytes(spec), "application/yaml"
    raise TypeError(f"a spec is a dict, YAML or JSON text, or a file path; got {type(spec).__name__}")


def _duration(v: Union[timedelta, float, int, str]) -> str:
    """A Go duration string: "10m" as given, a timedelta or a number of seconds as "600s"."""
    if isinstance(v, str):
        return v
    secs = v.total_seconds() if isinstance(v, timedelta) else float(v)
    return f"{secs:g}s"


def _rfc3339(t: datetime) -> str:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.isoformat()


def _seg(s: str) -> str:
    return urllib.parse.quote(str(s), safe="")


class Stream(Generic[T]):
    """An iterator over a streamed answer (JSON lines): log records or events. The
    request is sent when iteration starts (or on ``open()``), so an error such as
    NotFoundError is raised by the first ``next()``; a followed stream on which nothing
    has happened yet would otherwise hold the call until the first record (the server
    sends its headers with the first line). The iterator ends when the server ends the
    answer: at once for a plain read, once the job is terminal and its logs drained for
    ``jobs.logs(follow=True)``, never for ``events(follow=True)`` (break out of the loop,
    or ``close()``). With ``idle_timeout``, a stream on which nothing arrives for that
    many seconds raises TransportError. Usable in a ``with`` block, which closes the
    connection."""

    def __init__(self, opener: Callable[[], Response], parse: Callable[[Mapping[str, Any]], T]):
        self._opener = opener
        self._parse = parse
        self._resp: Optional[Response] = None
        self._lines: Optional[Iterator[bytes]] = None
        self.closed = False

    def open(self) -> "Stream[T]":
        """Send the request now (iteration does it otherwise)."""
        if self._resp is None and not self.closed:
            self._resp = self._opener()
            self._lines = self._resp.iter_lines()
        return self

    def __iter__(self) -> "Stream[T]":
        return self

    def __next__(self) -> T:
        if self.closed:
            raise StopIteration
        try:
            self.open()
            assert self._lines is not None
            while True:
                line = next(self._lines).strip()
                if not line:
                    continue
                try:
                    return self._parse(json.loads(line))
                except ValueError as e:
                    raise OpenDLCError(f"undecodable line in a streamed answer: {line[:200]!r}") from e
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._resp is not None:
                self._resp.close()

    def __enter__(self) -> "Stream[T]":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass


class Client:
    """A client of one OpenDLC API server.

    ``Client()`` finds the server and the token as ``dlc`` does (``$DLC_SERVER``, else
    http://127.0.0.1:8480; ``$DLC_TOKEN``, else the admin token ``dlc up`` wrote in its
    default state directory; ``$DLC_CA_CERT`` for an https server with a private CA).
    ``workspace`` is the default of every call that takes one (``dlc -w``'s default,
    ``default``). ``timeout`` bounds each call's wait for an answer, in seconds (None:
    no bound); followed streams are not bounded. ``transport`` replaces the HTTP layer
    (see opendlc.client.transport)."""

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None, *, workspace: str = "default",
                 ca_cert: Optional[str] = None, timeout: Optional[float] = 300.0, connect_timeout: float = 10.0,
                 transport: Optional[Transport] = None, environ: Optional[Mapping[str, str]] = None):
        cfg = resolve(server, token, ca_cert, environ)
        self.server = cfg.server
        self.workspace = workspace
        self.token_source = cfg.token_source
        self._token = cfg.token
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._transport = transport or default_transport(cfg.ca_cert)
        self.jobs = Jobs(self)
        self.experiments = Experiments(self)
        self.schedules = Schedules(self)
        self.pipelines = Pipelines(self)
        self.triggers = Triggers(self)
        self.rules = Rules(self)
        self.workspaces = Workspaces(self)
        self.tokens = Tokens(self)
        self.quota = Quotas(self)
        self.nodes = Nodes(self)

    def __repr__(self) -> str:
        return f"Client(server={self.server!r}, workspace={self.workspace!r})"

    # --- the HTTP layer ---------------------------------------------------------------

    def _url(self, path: str, query: Optional[Sequence[Tuple[str, str]]] = None) -> str:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(list(query))
        return url

    def _send(self, method: str, path: str, query: Optional[Sequence[Tuple[str, str]]] = None,
              body: Optional[bytes] = None, content_type: str = "", stream: bool = False,
              read_timeout: Optional[float] = -1.0) -> Response:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        url = self._url(path, query)
        rt = self._timeout if read_timeout == -1.0 else read_timeout
        resp = self._transport.request(method, url, headers, body, stream, (self._connect_timeout, rt))
        if resp.status >= 300:
            try:
                data = resp.read()
            finally:
                resp.close()
            raise error_from_response(resp.status, data, method, url)
        return resp

    def _call(self, method: str, path: str, query: Optional[Sequence[Tuple[str, str]]] = None,
              body: Any = None, spec: Optional[Spec] = None) -> Any:
        """Send a request (body as JSON, or spec as a document) and answer its decoded
        JSON body (None for 204)."""
        data, ct = None, ""
        if spec is not None:
            data, ct = _spec_body(spec)
        elif body is not None:
            data, ct = json.dumps(body).encode("utf-8"), "application/json"
        resp = self._send(method, path, query, data, ct)
        try:
            raw = resp.read()
        finally:
            resp.close()
        if resp.status == 204 or not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise OpenDLCError(f"{method} {path}: the answer is not JSON: {raw[:200]!r}") from e

    def _stream(self, path: str, query: Sequence[Tuple[str, str]], parse: Callable[[Mapping[str, Any]], T],
                follow: bool, idle_timeout: Optional[float]) -> Stream[T]:
        rt = idle_timeout if idle_timeout is not None else (None if follow else -1.0)
        return Stream(lambda: self._send("GET", path, query, stream=True, read_timeout=rt), parse)

    def _ws(self, workspace: Optional[str]) -> str:
        return workspace or self.workspace

    def _wspath(self, workspace: Optional[str], *parts: str) -> str:
        p = "/v1/workspaces/" + _seg(self._ws(workspace))
        for i, part in enumerate(parts):
            p += "/" + (part if i == 0 else _seg(part))
        return p

    def close(self) -> None:
        close = getattr(self._transport, "close", None)
        if close:
            close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- calls of no kind -------------------------------------------------------------

    def health(self) -> bool:
        """True when the server answers /healthz (raises otherwise)."""
        self._call("GET", "/healthz")
        return True

    def whoami(self) -> m.Identity:
        """The token's name, workspace, role and expiry."""
        return m.Identity.from_dict(self._call("GET", "/v1/whoami"))

    def validate(self, spec: Spec) -> m.ValidateResult:
        """Validate a document of any kind without creating anything; an invalid one
        raises InvalidSpecError naming every field at fault."""
        return m.ValidateResult.from_dict(self._call("POST", "/v1/validate", spec=spec))

    def events(self, workspace: Optional[str] = None, *, type: Optional[str] = None, job: Optional[str] = None,
               since: Union[timedelta, float, str, None] = None, follow: bool = False,
               idle_timeout: Optional[float] = None) -> Stream[m.Event]:
        """A workspace's events (CloudEvents, docs/events.md) since ``since`` ago
        (default 1 hour; a timedelta, seconds or a Go duration such as "10m"), only of
        ``type`` or of ``job`` when given. With follow, the stream goes on with new
        events until closed. idle_timeout: see Stream."""
        q: List[Tuple[str, str]] = []
        if type:
            q.append(("type", type))
        if job:
            q.append(("job", job))
        if since is not None:
            q.append(("since", _duration(since)))
        if follow:
            q.append(("follow", "true"))
        return self._stream(self._wspath(workspace, "events"), q, m.Event.from_dict, follow, idle_timeout)

    # --- run records ------------------------------------------------------------------

    def history(self, workspace: Optional[str] = None, *, kind: Optional[str] = None, name: Optional[str] = None,
                labels: Union[Mapping[str, str], Iterable[str], None] = None, phase: Optional[str] = None,
                finished_after: Optional[datetime] = None, finished_before: Optional[datetime] = None,
                origin: Optional[str] = None, parent: Optional[str] = None, checkpoint: Optional[str] = None,
                limit: Optional[int] = None, after: Optional[str] = None) -> m.Page[m.RunRecord]:
        """One page of a workspace's run records (finished jobs, experiments and
        pipeline runs, kept after Temporal forgets them), newest first. kind is
        TrainingJob, Experiment or Pipeline; origin "Kind" or "Kind/name" (such as
        "Schedule/nightly"); parent an experiment's or pipeline run's uid; checkpoint a
        URI prefix of the runs' checkpoint or inputs. The page's next_page_token is the
        ``after`` of the next page."""
        q = _list_query(phase, labels, limit, None, kind=kind, name=name, origin=origin, parent=parent,
                        checkpoint=checkpoint, after=after)
        if finished_after is not None:
            q.append(("finishedAfter", _rfc3339(finished_after)))
        if finished_before is not None:
            q.append(("finishedBefore", _rfc3339(finished_before)))
        d = self._call("GET", self._wspath(workspace, "history"), q) or {}
        return m.Page([m.RunRecord.from_dict(r) for r in d.get("records") or []], d.get("next", "") or "")

    def history_record(self, kind: str, uid: str, workspace: Optional[str] = None) -> m.RunRecord:
        """One run record by its kind (TrainingJob, Experiment, Pipeline) and uid;
        NotFoundError when the workspace has none."""
        return m.RunRecord.from_dict(self._call("GET", self._wspath(workspace, "history", kind, uid)))

    def lineage(self, workspace: Optional[str] = None, *, checkpoint: Optional[str] = None,
                schedule: Optional[str] = None) -> m.Lineage:
        """The runs that wrote or read under a checkpoint URI (each with its inputs), or
        every run a schedule started and those runs' own (trials, steps): exactly one
        of checkpoint and schedule."""
        if (checkpoint is None) == (schedule is None):
            raise ValueError("lineage: give exactly one of checkpoint and schedule")
        q = [("checkpoint", checkpoint)] if checkpoint is not None else [("schedule", str(schedule))]
        return m.Lineage.from_dict(self._call("GET", self._wspath(workspace, "lineage"), q) or {})

    def usage(self, workspaces: Union[str, Iterable[str], None] = None, *, start: Optional[datetime] = None,
              end: Optional[datetime] = None, group_by_label: Optional[str] = None) -> m.Usage:
        """GPU-, CPU- and memory-hours per workspace and UTC day (and label value) over
        [start, end), from the runs' attempts. Default: the token's workspace (every
        workspace for an admin's token) over the last 30 days."""
        if isinstance(workspaces, str):
            workspaces = [workspaces]
        q: List[Tuple[str, str]] = [("workspace", w) for w in workspaces or []]
        if start is not None:
            q.append(("from", _rfc3339(start)))
        if end is not None:
            q.append(("to", _rfc3339(end)))
        if group_by_label:
            q.append(("groupByLabel", group_by_label))
        return m.Usage.from_dict(self._call("GET", "/v1/usage", q) or {})

    # --- waiting ----------------------------------------------------------------------

    def _wait(self, what: str, get: Callable[[], T], done: Callable[[T], bool],
              show: Callable[[T], Tuple[int, Optional[int], str]], timeout: Optional[float], interval: float,
              progress: Optional[bool], on_change: Optional[Callable[[T], None]]) -> T:
        bar = Progress(what, progress)
        deadline = None if timeout is None else time.monotonic() + timeout
        last_state = None
        obj = None
        try:
            while True:
                obj = get()
                state = show(obj)
                bar.update(*state)
                if state != last_state and on_change is not None:
                    on_change(obj)
                last_state = state
                if done(obj):
                    return obj
                if deadline is not None and time.monotonic() >= deadline:
                    raise WaitTimeout(f"{what}: not ended after {timeout:g}s ({state[2]})", obj)
                pause = interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic()))
                time.sleep(pause)
        finally:
            bar.close()


def _list_query(phase: Optional[str] = None, labels: Union[Mapping[str, str], Iterable[str], None] = None,
                limit: Optional[int] = None, page_token: Optional[str] = None,
                **filters: Optional[str]) -> List[Tuple[str, str]]:
    q: List[Tuple[str, str]] = []
    if phase:
        q.append(("phase", phase))
    for k, v in filters.items():
        if v:
            q.append((k, v))
    if labels:
        items = [f"{k}={v}" for k, v in labels.items()] if isinstance(labels, Mapping) else list(labels)
        q.extend(("label", l) for l in items)
    if limit:
        q.append(("limit", str(limit)))
    if page_token:
        q.append(("pageToken", page_token))
    return q


def _page(d: Mapping[str, Any], parse: Callable[[Mapping[str, Any]], T]) -> m.Page[T]:
    return m.Page([parse(i) for i in d.get("items") or []], d.get("nextPageToken", "") or "")


def _all_pages(fetch: Callable[[Optional[str]], m.Page[T]]) -> Iterator[T]:
    token: Optional[str] = None
    while True:
        page = fetch(token)
        yield from page.items
        if not page.next_page_token:
            return
        token = page.next_page_token


class _Kind:
    def __init__(self, c: Client):
        self._c = c


class Jobs(_Kind):
    """Training jobs (``dlc job``)."""

    def _path(self, name: str, workspace: Optional[str], *rest: str) -> str:
        return self._c._wspath(workspace, "jobs", name) + "".join("/" + r for r in rest)

    def submit(self, spec: Spec) -> m.Job:
        """Validate and submit a TrainingJob in its metadata.workspace; answers the job,
        Pending. A refused spec raises InvalidSpecError with the fields at fault."""
        return m.Job.from_dict(self._c._call("POST", "/v1/jobs", spec=spec))

    def get(self, name: str, workspace: Optional[str] = None, *, uid: Optional[str] = None,
            include_deleted: bool = False) -> m.Job:
        """A job's spec and live status; ``uid`` selects one run (deleted or not),
        ``include_deleted`` the name's newest run even if deleted."""
        q = []
        if uid:
            q.append(("uid", uid))
        if include_deleted:
            q.append(("includeDeleted", "true"))
        return m.Job.from_dict(self._c._call("GET", self._path(name, workspace), q))

    def list(self, workspace: Optional[str] = None, *, phase: Optional[str] = None, framework: Optional[str] = None,
             labels: Union[Mapping[str, str], Iterable[str], None] = None, limit: Optional[int] = None,
             page_token: Optional[str] = None) -> m.Page[m.JobSummary]:
        """A page of a workspace's jobs, newest first."""
        q = _list_query(phase, labels, limit, page_token, framework=framework)
        return _page(self._c._call("GET", self._c._wspath(workspace, "jobs"), q), m.JobSummary.from_dict)

    def iter(self, workspace: Optional[str] = None, **filters: Any) -> Iterator[m.JobSummary]:
        """Every job of the list, page after page."""
        return _all_pages(lambda tok: self.list(workspace, page_token=tok, **filters))

    def stop(self, name: str, workspace: Optional[str] = None, *, reason: str = "") -> m.StopResult:
        """Stop a job; answers once it is terminal."""
        return m.StopResult.from_dict(self._c._call("POST", self._path(name, workspace, "stop"), body={"reason": reason}))

    def scale(self, name: str, replicas: int, workspace: Optional[str] = None) -> m.ScaleResult:
        """Set a running elastic job's replica count within spec.elastic."""
        return m.ScaleResult.from_dict(
            self._c._call("POST", self._path(name, workspace, "scale"), body={"replicas": int(replicas)}))

    def set_priority(self, name: str, priority: int, workspace: Optional[str] = None) -> int:
        """Change the priority (-1000 to 1000, higher first) of a job in the quota pool,
        queued (it moves in the queue) or admitted (it orders preemption); answers the
        priority set. ConflictError for a job the quota does not hold (another pool's,
        or ended)."""
        d = self._c._call("POST", self._path(name, workspace, "priority"), body={"priority": int(priority)})
        return int((d or {}).get("priority", priority))

    def delete(self, name: str, workspace: Optional[str] = None, *, purge: bool = False) -> None:
        """Stop the job if it runs and delete it; its records stay readable by uid
        unless purge."""
        self._c._call("DELETE", self._path(name, workspace), [("purge", "true")] if purge else None)

    def clone(self, name: str, new_name: str, workspace: Optional[str] = None, *,
              overrides: Optional[Mapping[str, Any]] = None) -> m.Job:
        """Start a new job, new_name, from this one's spec with overrides (a JSON merge
        patch of the document, such as {"spec": {"args": ["--lr", "0.1"]}})."""
        body: Dict[str, Any] = {"name": new_name}
        if overrides:
            body["overrides"] = dict(overrides)
        return m.Job.from_dict(self._c._call("POST", self._path(name, workspace, "clone"), body=body))

    def logs(self, name: str, workspace: Optional[str] = None, *, follow: bool = False,
             replica: Optional[str] = None, uid: Optional[str] = None,
             idle_timeout: Optional[float] = None) -> Stream[m.LogRecord]:
        """The job's log records, in order per replica. With follow, the iterator goes
        on until the job is terminal and every record is read. ``replica`` keeps one
        replica's (``worker-0``), ``uid`` reads one run of the name. idle_timeout: see
        Stream."""
        q = []
        if follow:
            q.append(("follow", "true"))
        if replica:
            q.append(("replica", replica))
        if uid:
            q.append(("uid", uid))
        return self._c._stream(self._path(name, workspace, "logs"), q, m.LogRecord.from_dict, follow, idle_timeout)

    def events(self, name: str, workspace: Optional[str] = None, **kw: Any) -> Stream[m.Event]:
        """The job's events (see Client.events)."""
        return self._c.events(workspace, job=name, **kw)

    def wait(self, name: str, workspace: Optional[str] = None, *, timeout: Optional[float] = None,
             interval: float = 1.0, progress: Optional[bool] = None,
             on_change: Optional[Callable[[m.Job], None]] = None) -> m.Job:
        """Poll the job until it is terminal (Succeeded, Failed, Stopped) and answer it.
        progress: a bar of finished replicas where a terminal is attached (None), always
        (True) or never (False). Raises WaitTimeout after timeout seconds."""
        def show(j: m.Job) -> Tuple[int, Optional[int], str]:
            total = sum(int((r or {}).get("replicas", 0) or 0) for r in (j.spec.get("spec", {}).get("roles") or {}).values())
            done = sum(1 for r in j.status.replicas if r.phase in m.JOB_TERMINAL)
            return done, total or None, j.status.phase
        def done(j: m.Job) -> bool:
            return j.status.terminal
        return self._c._wait(f"job {self._c._ws(workspace)}/{name}", lambda: self.get(name, workspace),
                             done, show, timeout, interval, progress, on_change)


class Experiments(_Kind):
    """HPO experiments and their trials (``dlc experiment``)."""

    def _path(self, name: str, workspace: Optional[str], *rest: str) -> str:
        return self._c._wspath(workspace, "experiments", name) + "".join("/" + r for r in rest)

    def create(self, spec: Spec) -> m.Experiment:
        """Validate and start an Experiment in its metadata.workspace."""
        return m.Experiment.from_dict(self._c._call("POST", "/v1/experiments", spec=spec))

    def get(self, name: str, workspace: Optional[str] = None) -> m.Experiment:
        return m.Experiment.from_dict(self._c._call("GET", self._path(name, workspace)))

    def list(self, workspace: Optional[str] = None, *, phase: Optional[str] = None,
             labels: Union[Mapping[str, str], Iterable[str], None] = None, limit: Optional[int] = None,
             page_token: Optional[str] = None) -> m.Page[m.ExperimentSummary]:
        q = _list_query(phase, labels, limit, page_token)
        return _page(self._c._call("GET", self._c._wspath(workspace, "experiments"), q), m.ExperimentSummary.from_dict)

    def iter(self, workspace: Optional[str] = None, **filters: Any) -> Iterator[m.ExperimentSummary]:
        return _all_pages(lambda tok: self.list(workspace, page_token=tok, **filters))

    def stop(self, name: str, workspace: Optional[str] = None, *, reason: str = "") -> m.ExperimentActionResult:
        """Stop the running trials; answers once the experiment is Stopped."""
        return m.ExperimentActionResult.from_dict(
            self._c._call("POST", self._path(name, workspace, "stop"), body={"reason": reason}))

    def resume(self, name: str, workspace: Optional[str] = None, *, reason: str = "") -> m.ExperimentActionResult:
        """Resume a Stopped experiment."""
        return m.ExperimentActionResult.from_dict(
            self._c._call("POST", self._path(name, workspace, "resume"), body={"reason": reason}))

    def extend(self, name: str, max_trials: int, workspace: Optional[str] = None) -> m.ExperimentActionResult:
        """Raise the experiment's maxTrials."""
        return m.ExperimentActionResult.from_dict(
            self._c._call("POST", self._path(name, workspace, "extend"), body={"maxTrials": int(max_trials)}))

    def enqueue(self, name: str, *trials: Mapping[str, Any], workspace: Optional[str] = None) -> m.ExperimentActionResult:
        """Run these parameter sets (name -> value, every search-space parameter) as the
        experiment's next trials, before the algorithm's suggestions."""
        return m.ExperimentActionResult.from_dict(
            self._c._call("POST", self._path(name, workspace, "enqueue"), body={"trials": [dict(t) for t in trials]}))

    def delete(self, name: str, workspace: Optional[str] = None) -> None:
        """Stop the experiment if it runs, then delete it and its trial jobs."""
        self._c._call("DELETE", self._path(name, workspace))

    def trials(self, name: str, workspace: Optional[str] = None, *, phase: Optional[str] = None) -> m.TrialList:
        """The experiment's trials by ID (``.to_dataframe()`` for a DataFrame)."""
        q = [("phase", phase)] if phase else []
        return m.TrialList.from_dict(self._c._call("GET", self._path(name, workspace, "trials"), q))

    def trial(self, name: str, trial_id: int, workspace: Optional[str] = None) -> m.TrialStatus:
        return m.TrialStatus.from_dict(self._c._call("GET", self._path(name, workspace, "trials", str(int(trial_id)))))

    def results(self, name: str, workspace: Optional[str] = None) -> Any:
        """The trials as a pandas DataFrame indexed by trial ID: job, phase, value,
        step, attempts, times, a ``param.NAME`` column per parameter and a
        ``value.NAME`` column per objective. Needs pandas; ``trials(...).records()``
        gives the same rows without it."""
        return self.trials(name, workspace).to_dataframe()

    def wait(self, name: str, workspace: Optional[str] = None, *, stopped: bool = False,
             timeout: Optional[float] = None, interval: float = 1.0, progress: Optional[bool] = None,
             on_change: Optional[Callable[[m.Experiment], None]] = None) -> m.Experiment:
        """Poll until the experiment has ended (Succeeded or Failed; Stopped too with
        stopped=True). The bar counts finished trials out of maxTrials."""
        def show(e: m.Experiment) -> Tuple[int, Optional[int], str]:
            s = e.status
            text = s.phase + (f" best={s.best_value:g}" if s.best_value is not None else "")
            return s.completed + s.pruned + s.failed, s.max_trials or None, text

        def done(e: m.Experiment) -> bool:
            return e.status.terminal or (stopped and e.status.phase == "Stopped")
        return self._c._wait(f"experiment {self._c._ws(workspace)}/{name}", lambda: self.get(name, workspace),
                             done, show, timeout, interval, progress, on_change)


class Schedules(_Kind):
    """Cron schedules (``dlc schedule``)."""

    def _path(self, name: str, workspace: Optional[str], *rest: str) -> str:
        return self._c._wspath(workspace, "schedules", name) + "".join("/" + r for r in rest)

    def create(self, spec: Spec) -> m.Schedule:
        return m.Schedule.from_dict(self._c._call("POST", "/v1/schedules", spec=spec))

    def get(self, name: str, workspace: Optional[str] = None, *, next: Optional[int] = None) -> m.Schedule:
        """The schedule's spec, next fire times (``next`` of them, default 5), running
        runs and history."""
        q = [("next", str(int(next)))] if next else []
        return m.Schedule.from_dict(self._c._call("GET", self._path(name, workspace), q))

    def list(self, workspace: Optional[str] = None, *, limit: Optional[int] = None,
             page_token: Optional[str] = None) -> m.Page[m.ScheduleSummary]:
        q = _list_query(limit=limit, page_token=page_token)
        return _page(self._c._call("GET", self._c._wspath(workspace, "schedules"), q), m.ScheduleSummary.from_dict)

    def iter(self, workspace: Optional[str] = None) -> Iterator[m.ScheduleSummary]:
        return _all_pages(lambda tok: self.list(workspace, page_token=tok))

    def update(self, spec: Spec, name: Optional[str] = None, workspace: Optional[str] = None) -> m.Schedule:
        """Replace a schedule's spec; name and workspace default to the document's."""
        if name is None or workspace is None:
            doc = spec if isinstance(spec, Mapping) else None
            if doc is None:
                raise TypeError("update needs name= (and workspace=) when the spec is not a dict")
            meta = doc.get("metadata") or {}
            name = name or meta.get("name")
            workspace = workspace or meta.get("workspace")
        return m.Schedule.from_dict(self._c._call("PUT", self._path(str(name), workspace), spec=spec))

    def pause(self, name: str, workspace: Optional[str] = None, *, note: str = "") -> m.Schedule:
        return m.Schedule.from_dict(self._c._call("POST", self._path(name, workspace, "pause"), body={"note": note}))

    def resume(self, name: str, workspace: Optional[str] = None) -> m.Schedule:
        return m.Schedule.from_dict(self._c._call("POST", self._path(name, workspace, "resume")))

    def trigger(self, name: str, workspace: Optional[str] = None, *,
                overlap_policy: Optional[str] = None) -> m.ScheduleRun:
        """Run the schedule's action now; answers the run."""
        body = {"overlapPolicy": overlap_policy} if overlap_policy else {}
        d = self._c._call("POST", self._path(name, workspace, "trigger"), body=body)
        return m.ScheduleRun.from_dict((d or {}).get("run") or {})

    def backfill(self, name: str, start: datetime, end: datetime, workspace: Optional[str] = None, *,
                 overlap_policy: Optional[str] = None) -> List[m.ScheduleRun]:
        """Run every time of [start, end) the schedule names, once each."""
        body: Dict[str, Any] = {"from": _rfc3339(start), "to": _rfc3339(end)}
        if overlap_policy:
            body["overlapPolicy"] = overlap_policy
        d = self._c._call("POST", self._path(name, workspace, "backfill"), body=body)
        return [m.ScheduleRun.from_dict(r) for r in (d or {}).get("runs") or []]

    def delete(self, name: str, workspace: Optional[str] = None) -> None:
        """Delete the schedule; jobs it started are left alone."""
        self._c._call("DELETE", self._path(name, workspace))


class Pipelines(_Kind):
    """Pipeline runs (``dlc pipeline``)."""

    def _path(self, name: str, workspace: Optional[str], *rest: str) -> str:
        return self._c._wspath(workspace, "pipelines", name) + "".join("/" + r for r in rest)

    def run(self, spec: Spec, params: Optional[Mapping[str, Any]] = None) -> m.PipelineRun:
        """Validate a Pipeline and start a run of it named metadata.name, with params
        overriding its parameters' defaults."""
        q = [("param", f"{k}={v}") for k, v in sorted((params or {}).items())]
        return m.PipelineRun.from_dict(self._c._call("POST", "/v1/pipelines", q, spec=spec))

    def get(self, name: str, workspace: Optional[str] = None) -> m.PipelineRun:
        return m.PipelineRun.from_dict(self._c._call("GET", self._path(name, workspace)))

    def list(self, workspace: Optional[str] = None, *, phase: Optional[str] = None,
             labels: Union[Mapping[str, str], Iterable[str], None] = None, limit: Optional[int] = None,
             page_token: Optional[str] = None) -> m.Page[m.PipelineSummary]:
        q = _list_query(phase, labels, limit, page_token)
        return _page(self._c._call("GET", self._c._wspath(workspace, "pipelines"), q), m.PipelineSummary.from_dict)

    def iter(self, workspace: Optional[str] = None, **filters: Any) -> Iterator[m.PipelineSummary]:
        return _all_pages(lambda tok: self.list(workspace, page_token=tok, **filters))

    def stop(self, name: str, workspace: Optional[str] = None, *, reason: str = "") -> m.StopResult:
        """Stop the run and its jobs; answers once it is terminal."""
        return m.StopResult.from_dict(self._c._call("POST", self._path(name, workspace, "stop"), body={"reason": reason}))

    def delete(self, name: str, workspace: Optional[str] = None) -> None:
        self._c._call("DELETE", self._path(name, workspace))

    def wait(self, name: str, workspace: Optional[str] = None, *, timeout: Optional[float] = None,
             interval: float = 1.0, progress: Optional[bool] = None,
             on_change: Optional[Callable[[m.PipelineRun], None]] = None) -> m.PipelineRun:
        """Poll until the run is terminal; the bar counts finished steps."""
        def show(p: m.PipelineRun) -> Tuple[int, Optional[int], str]:
            total = len(p.spec.get("spec", {}).get("steps") or []) or len(p.status.steps)
            done = sum(1 for s in p.status.steps if s.phase not in ("", "Pending", "Running"))
            running = [s.name for s in p.status.steps if s.phase == "Running"]
            return done, total or None, p.status.phase + (f" ({', '.join(running)})" if running else "")
        def done(p: m.PipelineRun) -> bool:
            return p.status.terminal
        return self._c._wait(f"pipeline {self._c._ws(workspace)}/{name}", lambda: self.get(name, workspace),
                             done, show, timeout, interval, progress, on_change)


class _Documents(_Kind):
    _collection = ""
    _create = ""
    _model: Any = None

    def apply(self, spec: Spec) -> Any:
        """Create or replace the document in its metadata.workspace."""
        return self._model.from_dict(self._c._call("POST", self._create, spec=spec))

    def get(self, name: str, workspace: Optional[str] = None) -> Any:
        return self._model.from_dict(self._c._call("GET", self._c._wspath(workspace, self._collection, name)))

    def list(self, workspace: Optional[str] = None) -> List[Any]:
        d = self._c._call("GET", self._c._wspath(workspace, self._collection))
        return [self._model.from_dict(i) for i in (d or {}).get("items") or []]

    def delete(self, name: str, workspace: Optional[str] = None) -> None:
        self._c._call("DELETE", self._c._wspath(workspace, self._collection, name))


class Triggers(_Documents):
    """Triggers: NATS events that start jobs or pipelines (``dlc trigger``). Deleting
    one leaves what it started running."""
    _collection, _create, _model = "triggers", "/v1/triggers", m.Trigger


class Rules(_Documents):
    """Notification rules: webhooks on events (``dlc rule``); secrets come back
    redacted."""
    _collection, _create, _model = "notificationrules", "/v1/notificationrules", m.NotificationRule


class Workspaces(_Kind):
    """The workspace registry (``dlc workspace``; creating and deleting is an
    admin's)."""

    def create(self, name: str, *, namespace: str = "", description: str = "",
               storage_locations: Optional[Sequence[str]] = None,
               pod_defaults: Optional[Mapping[str, Any]] = None) -> m.Workspace:
        body: Dict[str, Any] = {"name": name}
        if namespace:
            body["namespace"] = namespace
        if description:
            body["description"] = description
        if storage_locations:
            body["storage"] = {"locations": list(storage_locations)}
        if pod_defaults:
            body["podDefaults"] = dict(pod_defaults)
        return m.Workspace.from_dict(self._c._call("POST", "/v1/workspaces", body=body))

    def get(self, name: str) -> m.Workspace:
        return m.Workspace.from_dict(self._c._call("GET", "/v1/workspaces/" + _seg(name)))

    def list(self) -> List[m.Workspace]:
        """All workspaces for an admin, the token's own otherwise."""
        d = self._c._call("GET", "/v1/workspaces")
        return [m.Workspace.from_dict(i) for i in (d or {}).get("items") or []]

    def delete(self, name: str) -> None:
        """Delete a workspace that holds nothing, and revoke its tokens (409 while it
        holds jobs, experiments, pipelines or schedules)."""
        self._c._call("DELETE", "/v1/workspaces/" + _seg(name))


class Tokens(_Kind):
    """API tokens (``dlc token``; an admin's, or a workspace admin's in its
    workspace)."""

    def create(self, name: str, workspace: str, role: str = "member", *,
               ttl: Union[timedelta, float, str, None] = None, expires_at: Optional[datetime] = None) -> m.CreatedToken:
        """Create a token; roles are viewer, member, workspace-admin and admin (with
        workspace "*"). The answer's ``secret`` is shown only now."""
        body: Dict[str, Any] = {"name": name, "workspace": workspace, "role": role}
        if ttl is not None:
            body["ttl"] = _duration(ttl)
        if expires_at is not None:
            body["expiresAt"] = _rfc3339(expires_at)
        return m.CreatedToken.from_dict(self._c._call("POST", "/v1/tokens", body=body))

    def list(self, workspace: Optional[str] = None) -> List[m.Token]:
        """Tokens without their secrets; all workspaces' when workspace is None."""
        d = self._c._call("GET", "/v1/tokens", [("workspace", workspace)] if workspace else None)
        return [m.Token.from_dict(i) for i in (d or {}).get("items") or []]

    def revoke(self, name: str) -> None:
        """Revoke a token; it stops working at once."""
        self._c._call("DELETE", "/v1/tokens/" + _seg(name))


class Quotas(_Kind):
    """Workspace quotas (``dlc quota``)."""

    def get(self, workspace: Optional[str] = None) -> m.QuotaStatus:
        """The quota, what admitted jobs use, what the workspace borrows and lends, the
        queue, and (in a cohort) every member's figures."""
        return m.QuotaStatus.from_dict(self._c._call("GET", self._c._wspath(workspace, "quota")))

    def set(self, workspace: Optional[str] = None, *, gpu: Optional[int] = None, cpu: Union[str, int, float, None] = None,
            memory: Optional[str] = None, gpu_models: Optional[Mapping[str, int]] = None, cohort: str = "",
            borrowing_limit: Union[Mapping[str, Any], m.QuotaLimit, None] = None,
            lending_limit: Union[Mapping[str, Any], m.QuotaLimit, None] = None, weight: Optional[int] = None,
            reclaim_within_cohort: str = "", preempt_within_workspace: str = "") -> m.Quota:
        """Set the quota (an admin's); it replaces the whole quota: a resource left out is
        unlimited, a setting left out is its default. gpu, cpu, memory and gpu_models
        (GPUs per accelerator model, the node label nvidia.com/gpu.product) are the
        nominal quota; cpu and memory are Kubernetes quantities ("8", "500m", "64Gi").

        In a cohort (``cohort``), borrowing_limit bounds what the workspace borrows
        beyond its nominal quota and lending_limit what the other members may use of it:
        each a QuotaLimit or a mapping with the keys gpu, cpu, memory and gpu_models.
        weight (1 to 1000) is the fair-sharing weight. reclaim_within_cohort is "Any",
        "LowerPriority" or "Never"; preempt_within_workspace "Never" or "LowerPriority".
        The server checks the values (InvalidSpecError naming each field)."""
        body: Dict[str, Any] = {}
        if gpu is not None:
            body["gpu"] = int(gpu)
        if cpu is not None:
            body["cpu"] = str(cpu)
        if memory is not None:
            body["memory"] = str(memory)
        if gpu_models:
            body["gpuModels"] = {str(k): int(v) for k, v in gpu_models.items()}
        if cohort:
            body["cohort"] = cohort
        for arg, key, value in (("borrowing_limit", "borrowingLimit", borrowing_limit),
                                ("lending_limit", "lendingLimit", lending_limit)):
            if value is not None:
                body[key] = _quota_limit(arg, value)
        if weight is not None:
            body["weight"] = int(weight)
        preemption = {k: v for k, v in (("reclaimWithinCohort", reclaim_within_cohort),
                                        ("withinWorkspace", preempt_within_workspace)) if v}
        if preemption:
            body["preemption"] = preemption
        return m.Quota.from_dict(self._c._call("PUT", self._c._wspath(workspace, "quota"), body=body) or {})

    def set_job_priority(self, name: str, priority: int, workspace: Optional[str] = None) -> int:
        """Change the priority (-1000 to 1000, higher first) of a job in the quota
        pool, queued (it moves in the queue) or admitted (it orders preemption); the
        same as ``jobs.set_priority``. ConflictError for a job the quota does not hold."""
        return self._c.jobs.set_priority(name, priority, workspace)


def _quota_limit(arg: str, value: Union[Mapping[str, Any], m.QuotaLimit]) -> Dict[str, Any]:
    """A borrowing or lending limit as the API writes it; an unknown key is a
    ValueError naming the argument."""
    if isinstance(value, m.QuotaLimit):
        return value.to_dict()
    unknown = sorted(set(value) - {"gpu", "cpu", "memory", "gpu_models", "gpuModels"})
    if unknown:
        raise ValueError(f"{arg}: unknown resource(s) {', '.join(unknown)}: want gpu, cpu, memory or gpu_models")
    gpu = value.get("gpu")
    models = value.get("gpu_models", value.get("gpuModels")) or {}
    return m.QuotaLimit(int(gpu) if gpu is not None else None, str(value.get("cpu") or ""), str(value.get("memory") or ""),
                        {str(k): int(v) for k, v in models.items()}).to_dict()


class Nodes(_Kind):
    """Node health verdicts and quarantine (``dlc node``; Kubernetes backends)."""

    def list(self) -> List[m.Node]:
        d = self._c._call("GET", "/v1/nodes")
        return [m.Node.from_dict(i) for i in (d or {}).get("items") or []]

    def get(self, name: str) -> m.Node:
        return m.Node.from_dict(self._c._call("GET", "/v1/nodes/" + _seg(name)))

    def release(self, name: str, *, reason: str = "") -> m.Node:
        """Release a node from quarantine (cluster admin)."""
        return m.Node.from_dict(self._c._call("POST", "/v1/nodes/" + _seg(name) + "/release", body={"reason": reason}))

