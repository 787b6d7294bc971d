"""opendlc.client's parts that need no server: configuration, error mapping, request
shapes (through a fake transport), time parsing, the progress display. The real
stack's tests are test_client_stack.py."""

from __future__ import annotations

import io
import json
import os
import sys
import urllib.parse
from datetime import datetime, timedelta, timezone

import pytest

from opendlc.client import (AlreadyExistsError, APIError, Client, ConfigError, ConflictError, InvalidSpecError,
                            NotFoundError, PermissionDeniedError, ServerError, UnavailableError)
from opendlc.client.config import default_state_dir, resolve
from opendlc.client.errors import error_from_response
from opendlc.client.models import Page, parse_time
from opendlc.client.progress import Progress


class FakeResponse:
    def __init__(self, status, body=b"", lines=None):
        self.status = status
        self.headers = {}
        self._body = body
        self._lines = lines or []
        self.closed = False

    def read(self):
        return self._body

    def iter_lines(self):
        yield from self._lines

    def close(self):
        self.closed = True


class FakeTransport:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests = []

    def request(self, method, url, headers, body, stream, timeout):
        self.requests.append({"method": method, "url": url, "headers": dict(headers), "body": body,
                              "stream": stream, "timeout": timeout})
        return self.answers.pop(0)


def client(*answers, **kw):
    t = FakeTransport(*answers)
    return Client("http://dlc.test:8480/", "dlc_tok", transport=t, environ={}, **kw), t


def test_config_follows_the_cli(tmp_path):
    assert resolve(environ={}).server == "http://127.0.0.1:8480"
    assert resolve(environ={"DLC_SERVER": "https://x:1/"}).server == "https://x:1"
    assert resolve("http://a:2", environ={"DLC_SERVER": "https://x:1"}).server == "http://a:2"
    state = tmp_path / "opendlc"
    state.mkdir()
    (state / "admin-token").write_text("dlc_fromfile\n")
    env = {"XDG_STATE_HOME": str(tmp_path)}
    cfg = resolve(environ=env)
    assert cfg.token == "dlc_fromfile" and cfg.token_source == str(state / "admin-token")
    assert resolve(environ={**env, "DLC_TOKEN": "dlc_env"}).token == "dlc_env"
    assert resolve(token="dlc_arg", environ={**env, "DLC_TOKEN": "dlc_env"}).token == "dlc_arg"
    home = tmp_path / "home"
    (home / ".local" / "state" / "opendlc").mkdir(parents=True)
    (home / ".local" / "state" / "opendlc" / "admin-token").write_text("dlc_home")
    assert resolve(environ={"HOME": str(home)}).token == "dlc_home"
    assert resolve(environ={"HOME": str(tmp_path / "nobody")}).token == ""
    assert default_state_dir({"TMPDIR": str(tmp_path)}) == str(tmp_path / "opendlc")  # no $HOME, as in Go
    (state / "admin-token").write_text("garbage")
    with pytest.warns(UserWarning, match="does not hold an OpenDLC token"):  # as dlc: a warning, no token
        assert resolve(environ=env).token == ""
    with pytest.raises(ConfigError):
        resolve("localhost:8480", environ={})
    with pytest.raises(ConfigError):
        resolve(environ={"DLC_CA_CERT": str(tmp_path / "missing.pem")})


@pytest.mark.parametrize("status,body,cls,fields", [
    (422, {"error": {"code": "InvalidSpec", "message": "the spec has 2 problem(s)",
                     "details": [{"field": "spec.roles.worker.replicas", "message": "must be >= 1"},
                                 {"field": "metadata.name", "message": "required"}]}},
     InvalidSpecError, ["spec.roles.worker.replicas", "metadata.name"]),
    (403, {"error": {"code": "PermissionDenied", "message": "no", "details": [{"field": "metadata.workspace",
                                                                               "message": "x"}]}},
     PermissionDeniedError, ["metadata.workspace"]),
    (404, {"error": {"code": "NotFound", "message": "job x not found"}}, NotFoundError, []),
    (409, {"error": {"code": "AlreadyExists", "message": "exists"}}, AlreadyExistsError, []),
    (409, {"error": {"code": "Whatever", "message": "conflict"}}, ConflictError, []),
    (503, {"error": {"code": "Unavailable", "message": "later"}}, UnavailableError, []),
    (502, "<html>bad gateway</html>", ServerError, []),
    (418, "", APIError, []),
])
def test_errors_by_status_and_code(status, body, cls, fields):
    raw = json.dumps(body).encode() if isinstance(body, dict) else body.encode()
    e = error_from_response(status, raw, "POST", "http://x/v1/jobs")
    assert type(e) is cls and e.status == status and e.fields == fields
    if isinstance(body, str) and body:
        assert e.message == body


def test_requests_have_the_routes_shapes():
    job = {"uid": "u1", "spec": {"metadata": {"name": "j", "workspace": "default"}}, "status": {"phase": "Pending"}}
    c, t = client(FakeResponse(201, json.dumps(job).encode()), FakeResponse(201, json.dumps(job).encode()),
                  FakeResponse(200, b'{"items": [], "nextPageToken": "n"}'), FakeResponse(204),
                  FakeResponse(200, b'{"phase": "Stopped"}'), workspace="team a")
    assert c.jobs.submit({"kind": "TrainingJob"}).name == "j"
    assert c.jobs.submit("kind: TrainingJob\n").phase == "Pending"
    page = c.jobs.list(phase="Running", labels={"a": "b"}, limit=5, page_token="p")
    assert page.next_page_token == "n" and list(page) == []
    c.jobs.delete("j/1", purge=True)
    assert c.jobs.stop("j", reason="r").phase == "Stopped"
    r = t.requests
    assert (r[0]["method"], r[0]["url"]) == ("POST", "http://dlc.test:8480/v1/jobs")
    assert r[0]["headers"]["Content-Type"] == "application/json" and r[0]["headers"]["Authorization"] == "Bearer dlc_tok"
    assert r[1]["headers"]["Content-Type"] == "application/yaml" and r[1]["body"] == b"kind: TrainingJob\n"
    assert r[2]["url"] == "http://dlc.test:8480/v1/workspaces/team%20a/jobs?phase=Running&label=a%3Db&limit=5&pageToken=p"
    assert (r[3]["method"], r[3]["url"]) == ("DELETE", "http://dlc.test:8480/v1/workspaces/team%20a/jobs/j%2F1?purge=true")
    assert json.loads(r[4]["body"]) == {"reason": "r"}


def test_stream_opens_lazily_and_closes():
    lines = [json.dumps({"line": f"l{i}", "seq": i, "time": "2026-01-02T03:04:05.123456789Z"}).encode() for i in (1, 2)]
    resp = FakeResponse(200, lines=lines[:1] + [b""] + lines[1:])
    c, t = client(resp)
    s = c.jobs.logs("j", follow=True, replica="worker-0")
    assert t.requests == []  # nothing sent before iteration
    recs = list(s)
    assert [r.line for r in recs] == ["l1", "l2"] and recs[0].time.microsecond == 123456
    assert t.requests[0]["stream"] and t.requests[0]["timeout"][1] is None  # a follower is not bounded
    assert t.requests[0]["url"].endswith("/jobs/j/logs?follow=true&replica=worker-0")
    assert resp.closed and s.closed

    c, _ = client(FakeResponse(404, b'{"error": {"code": "NotFound", "message": "job j not found"}}'))
    with pytest.raises(NotFoundError):
        next(iter(c.jobs.logs("j")))


def _job_answers():
    def job(phase, replicas):
        return FakeResponse(200, json.dumps({
            "uid": "u", "spec": {"metadata": {"name": "j"}, "spec": {"roles": {"worker": {"replicas": 2}}}},
            "status": {"phase": phase, "replicas": [{"name": f"r{i}", "phase": p} for i, p in enumerate(replicas)]},
        }).encode())
    return (job("Pending", []), job("Running", ["Running", "Running"]), job("Running", ["Succeeded", "Running"]),
            job("Succeeded", ["Succeeded", "Succeeded"]))


def test_wait_polls_until_terminal_with_lines_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # as if python3-tqdm were not installed
    c, t = client(*_job_answers())
    seen = []
    j = c.jobs.wait("j", interval=0, progress=True, on_change=lambda j: seen.append(j.phase))
    assert j.phase == "Succeeded" and len(t.requests) == 4
    assert seen == ["Pending", "Running", "Running", "Succeeded"]
    assert capsys.readouterr().err.splitlines() == [
        "job default/j: 0/2 Pending", "job default/j: 0/2 Running", "job default/j: 1/2 Running",
        "job default/j: 2/2 Succeeded"]


def test_wait_shows_a_tqdm_bar(capsys):
    import tqdm  # noqa: F401 - task deps installs python3-tqdm; the line display is tested above
    c, _ = client(*_job_answers())
    assert c.jobs.wait("j", interval=0, progress=True).phase == "Succeeded"
    err = capsys.readouterr().err
    assert "2/2" in err and "[Succeeded]" in err and "job default/j" in err


def test_progress_is_off_without_a_terminal():
    out = io.StringIO()
    p = Progress("x", stream=out)
    assert not p.enabled
    p.update(1, 2, "Running")
    p.close()
    assert out.getvalue() == ""


def test_times_and_pages():
    assert parse_time("2026-12-06T14:45:09.022327845Z") == datetime(2026, 12, 6, 14, 45, 9, 22327, tzinfo=timezone.utc)
    assert parse_time("2026-12-06T14:45:09+08:00").utcoffset() == timedelta(hours=8)
    assert parse_time("0001-01-01T00:00:00Z") is None and parse_time(None) is None
    with pytest.raises(ValueError):
        parse_time("yesterday")
    p = Page([1, 2], "")
    assert list(p) == [1, 2] and len(p) == 2 and p[1] == 2


def test_dataframe_without_pandas_names_the_package(monkeypatch):
    import builtins
    from opendlc.client.models import TrialList
    trials = TrialList.from_dict({"items": [{"id": 0, "params": {"x": 0.5}, "value": 0.5, "phase": "Completed"}]})
    assert trials.records()[0]["param.x"] == 0.5
    real_import = builtins.__import__

    def no_pandas(name, *a, **kw):
        if name == "pandas":
            raise ImportError("no pandas")
        return real_import(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match="python3-pandas"):
        trials.to_dataframe()


RUN_RECORD = {
    "workspace": "ml", "kind": "TrainingJob", "name": "train", "uid": "0b7c8a52-3f4e-4c1d-9a2b-1c2d3e4f5a6b",
    "phase": "Succeeded", "labels": {"team": "cv"}, "submittedBy": "alice",
    "origin": {"kind": "Schedule", "name": "nightly"},
    "submitted": "2026-03-01T10:00:00Z", "started": "2026-03-01T10:30:00.5Z", "finished": "2026-03-01T12:00:00Z",
    "image": "pytorch:2", "inputs": ["s3://data/a"], "checkpoint": "s3://ckpt/train/step-100",
    "metrics": {"loss": 0.25, "steps": 100},
    "attempts": [
        {"attempt": 1, "start": "2026-03-01T10:30:00Z", "end": "2026-03-01T11:00:00Z", "outcome": "Restarting",
         "reason": "NodeLost", "nodes": ["n1"]},
        {"attempt": 2, "start": "2026-03-01T11:00:00Z", "end": "2026-03-01T12:00:00Z", "outcome": "Succeeded",
         "nodes": ["n2"], "resumedFrom": "s3://ckpt/train/step-50"},
    ],
    "demand": {"gpu": 8, "cpu": 32, "memoryBytes": 274877906944},
    "spec": {"kind": "TrainingJob"}, "result": {"phase": "Succeeded"},
}


def test_run_records_requests_and_answers():
    """history, history_record, lineage and usage send the API's parameters and read
    its answers; the answers here are valid against docs/openapi.json, so they are the
    server's shapes."""
    page = {"records": [RUN_RECORD], "next": "c1"}
    lineage = {"records": [RUN_RECORD, {**RUN_RECORD, "uid": "1b7c8a52-3f4e-4c1d-9a2b-1c2d3e4f5a6b", "name": "eval",
                                        "origin": {"kind": "Pipeline", "name": "p", "step": "eval"}}]}
    usage = {"from": "2026-02-01T00:00:00Z", "to": "2026-03-02T00:00:00Z",
             "rows": [{"workspace": "ml", "day": "2026-03-01", "label": "cv", "gpuHours": 12, "cpuHours": 48.5,
                       "memoryGiBHours": 384, "runs": 1}]}
    c, t = client(*(FakeResponse(200, json.dumps(a).encode()) for a in (page, RUN_RECORD, lineage, usage)),
                  workspace="ml")
    got = c.history(kind="TrainingJob", labels={"team": "cv"}, phase="Succeeded", origin="Schedule/nightly",
                    finished_after=datetime(2026, 3, 1), limit=10, after="c0", checkpoint="s3://ckpt")
    assert got.next_page_token == "c1" and len(got) == 1
    r = got[0]
    assert (r.name, r.kind, r.phase, r.origin.kind, r.origin.name) == ("train", "TrainingJob", "Succeeded",
                                                                       "Schedule", "nightly")
    assert r.duration == timedelta(hours=1, minutes=29, seconds=59, milliseconds=500)
    assert [a.outcome for a in r.attempts] == ["Restarting", "Succeeded"]
    assert r.attempts[1].resumed_from == "s3://ckpt/train/step-50" and r.attempts[0].end == parse_time("2026-03-01T11:00:00Z")
    assert r.metrics == {"loss": 0.25, "steps": 100.0} and r.demand["gpu"] == 8 and r.spec == {"kind": "TrainingJob"}
    assert c.history_record("TrainingJob", r.uid).checkpoint == "s3://ckpt/train/step-100"
    l = c.lineage(schedule="nightly")
    assert [x.name for x in l] == ["train", "eval"] and not l.truncated and l.records[1].origin.step == "eval"
    u = c.usage(["ml", "other"], start=datetime(2026, 2, 1, tzinfo=timezone.utc), group_by_label="team")
    assert u.start == datetime(2026, 2, 1, tzinfo=timezone.utc) and len(u) == 1
    assert (u.rows[0].gpu_hours, u.rows[0].cpu_hours, u.rows[0].memory_gib_hours, u.rows[0].runs, u.rows[0].label) == \
        (12.0, 48.5, 384.0, 1, "cv")

    urls = [urllib.parse.urlparse(req["url"]) for req in t.requests]
    assert [u.path for u in urls] == ["/v1/workspaces/ml/history",
                                      "/v1/workspaces/ml/history/TrainingJob/0b7c8a52-3f4e-4c1d-9a2b-1c2d3e4f5a6b",
                                      "/v1/workspaces/ml/lineage", "/v1/usage"]
    queries = [urllib.parse.parse_qs(u.query) for u in urls]
    assert queries[0] == {"kind": ["TrainingJob"], "label": ["team=cv"], "phase": ["Succeeded"],
                          "origin": ["Schedule/nightly"], "finishedAfter": ["2026-03-01T00:00:00+00:00"],
                          "limit": ["10"], "after": ["c0"], "checkpoint": ["s3://ckpt"]}
    assert queries[2] == {"schedule": ["nightly"]}
    assert queries[3] == {"workspace": ["ml", "other"], "from": ["2026-02-01T00:00:00+00:00"], "groupByLabel": ["team"]}

    from openapi_check import check
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")) as f:
        doc = json.load(f)
    records = [{"method": req["method"], "url": req["url"], "status": 200, "content_type": "", "body": None,
                "stream": False, "answer": json.dumps(a).encode()}
               for req, a in zip(t.requests, (page, RUN_RECORD, lineage, usage))]
    mismatches, operations = check(doc, records)
    assert not mismatches
    assert operations == {"listHistory", "getHistory", "lineage", "usage"}


def test_lineage_needs_one_of_checkpoint_and_schedule():
    c, t = client()
    with pytest.raises(ValueError, match="exactly one"):
        c.lineage()
    with pytest.raises(ValueError, match="exactly one"):
        c.lineage(checkpoint="s3://x", schedule="n")
    assert t.requests == []


def test_history_record_not_found():
    body = b'{"error":{"code":"NotFound","message":"no TrainingJob run record u in workspace ml"}}'
    c, _ = client(FakeResponse(404, body))
    with pytest.raises(NotFoundError, match="no TrainingJob run record"):
        c.history_record("TrainingJob", "u")


QUOTA_STATUS = {
    "workspace": "ml",
    "limits": {"gpu": 8, "cpu": "64", "memory": "256Gi", "gpuModels": {"NVIDIA-A100-SXM4-80GB": 4}, "cohort": "research",
               "borrowingLimit": {"gpu": 4}, "lendingLimit": {"cpu": "32", "gpuModels": {"NVIDIA-A100-SXM4-80GB": 2}},
               "weight": 2, "preemption": {"reclaimWithinCohort": "LowerPriority"}},
    "used": {"gpu": 10, "cpu": "40", "memory": "160Gi", "gpuModels": {"NVIDIA-A100-SXM4-80GB": 4}},
    "borrowed": {"gpu": 2, "cpu": "0", "memory": "0"},
    "lent": {"gpu": 0, "cpu": "8", "memory": "0"},
    "admitted": [
        {"job": "train", "priority": 10, "resources": {"gpu": 8, "cpu": "32", "memory": "128Gi"},
         "since": "2026-12-07T09:30:00Z"},
        {"job": "extra", "resources": {"gpu": 2, "cpu": "8", "memory": "32Gi"}, "since": "2026-12-07T09:31:00Z",
         "borrowing": True, "preempting": {"by": "eval", "workspace": "vision", "reason": "Reclaimed",
                                           "since": "2026-12-07T09:32:00Z"}},
    ],
    "queue": [{"job": "big", "priority": 5, "resources": {"gpu": 4, "cpu": "16", "memory": "64Gi"},
               "since": "2026-12-07T09:33:00Z", "waitingFor": ["small-1", "small-2"]}],
    "cohort": {"name": "research", "pool": {"gpu": 16, "cpu": "96", "memory": "512Gi"},
               "borrowed": {"gpu": 2, "cpu": "0", "memory": "0"},
               "members": [
                   {"workspace": "ml", "nominal": {"gpu": 8, "cpu": "64", "memory": "256Gi"},
                    "used": {"gpu": 10, "cpu": "40", "memory": "160Gi"}, "borrowed": {"gpu": 2, "cpu": "0", "memory": "0"},
                    "lent": {"gpu": 0, "cpu": "8", "memory": "0"}, "weight": 2, "share": 0.0625, "admitted": 2, "queued": 1},
                   {"workspace": "vision", "nominal": {"gpu": 8, "cpu": "32", "memory": "256Gi"},
                    "used": {"gpu": 6, "cpu": "12", "memory": "64Gi"}, "borrowed": {"gpu": 0, "cpu": "0", "memory": "0"},
                    "lent": {"gpu": 2, "cpu": "0", "memory": "0"}, "weight": 1, "share": 0, "admitted": 1, "queued": 3}]},
}


def test_quota_cohort_fields_and_job_priority():
    """quota.set sends the cohort, limits, weight and policy as the API spells them;
    quota.get reads borrowed, lent, the jobs' borrowing, preemption and waiting-for and
    the cohort's members; jobs.set_priority (and quota.set_job_priority) post the
    priority. Requests and answers are valid against docs/openapi.json."""
    from opendlc.client import QuotaLimit

    put_answer = QUOTA_STATUS["limits"]
    answers = (put_answer, QUOTA_STATUS, {"priority": -5}, {"priority": 100})
    c, t = client(*(FakeResponse(200, json.dumps(a).encode()) for a in answers), workspace="ml")
    q = c.quota.set(gpu=8, cpu=64, memory="256Gi", gpu_models={"NVIDIA-A100-SXM4-80GB": 4}, cohort="research",
                    borrowing_limit={"gpu": 4}, lending_limit=QuotaLimit(None, "32", "", {"NVIDIA-A100-SXM4-80GB": 2}),
                    weight=2, reclaim_within_cohort="LowerPriority")
    assert json.loads(t.requests[0]["body"]) == put_answer
    assert (t.requests[0]["method"], urllib.parse.urlparse(t.requests[0]["url"]).path) == ("PUT", "/v1/workspaces/ml/quota")
    assert (q.gpu, q.cpu, q.gpu_models, q.cohort, q.weight) == (8, "64", {"NVIDIA-A100-SXM4-80GB": 4}, "research", 2)
    assert q.borrowing_limit == QuotaLimit(4, "", "", {})
    assert q.lending_limit == QuotaLimit(None, "32", "", {"NVIDIA-A100-SXM4-80GB": 2})
    assert (q.preemption.reclaim_within_cohort, q.preemption.within_workspace) == ("LowerPriority", "")

    st = c.quota.get()
    assert (st.used.gpu, st.used.gpu_models, st.borrowed.gpu, st.lent.cpu) == (10, {"NVIDIA-A100-SXM4-80GB": 4}, 2, "8")
    train, extra = st.admitted
    assert not train.borrowing and train.preempting is None and train.waiting_for == []
    assert extra.borrowing and (extra.preempting.by, extra.preempting.workspace, extra.preempting.reason) == \
        ("eval", "vision", "Reclaimed")
    assert extra.preempting.since == datetime(2026, 12, 7, 9, 32, tzinfo=timezone.utc)
    assert st.queue[0].waiting_for == ["small-1", "small-2"] and st.queue[0].priority == 5
    assert (st.cohort.name, st.cohort.pool.gpu, st.cohort.borrowed.gpu) == ("research", 16, 2)
    ml, vision = st.cohort.members
    assert (ml.workspace, ml.nominal.gpu, ml.used.gpu, ml.borrowed.gpu, ml.lent.cpu, ml.weight, ml.share, ml.admitted,
            ml.queued) == ("ml", 8, 10, 2, "8", 2, 0.0625, 2, 1)
    assert (vision.lent.gpu, vision.share, vision.queued) == (2, 0.0, 3)

    assert c.jobs.set_priority("train", -5) == -5
    assert c.quota.set_job_priority("train", 100, "ml") == 100
    assert [(r["method"], urllib.parse.urlparse(r["url"]).path, json.loads(r["body"])) for r in t.requests[2:]] == [
        ("POST", "/v1/workspaces/ml/jobs/train/priority", {"priority": -5}),
        ("POST", "/v1/workspaces/ml/jobs/train/priority", {"priority": 100})]

    from openapi_check import check
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "openapi.json")) as f:
        doc = json.load(f)
    records = [{"method": req["method"], "url": req["url"], "status": 200, "content_type": "application/json",
                "body": req["body"], "stream": False, "answer": json.dumps(a).encode()}
               for req, a in zip(t.requests, answers)]
    mismatches, operations = check(doc, records)
    assert not mismatches
    assert operations == {"setQuota", "getQuota", "setJobPriority"}


def test_quota_outside_a_cohort_and_bad_limits():
    """An answer without the cohort fields reads as zero borrowed and lent and no
    cohort; a limit with an unknown resource is refused before anything is sent."""
    c, t = client(FakeResponse(200, b'{"workspace":"ml","limits":{"gpu":4},"used":{"gpu":1,"cpu":"2","memory":"4Gi"},'
                                    b'"admitted":[],"queue":[]}'), workspace="ml")
    st = c.quota.get()
    assert st.cohort is None and st.borrowed.gpu == 0 and st.lent.memory == "0" and st.limits.cohort == ""
    assert st.limits.borrowing_limit is None and st.limits.preemption is None and st.limits.gpu_models == {}
    with pytest.raises(ValueError, match="borrowing_limit: unknown resource.*gpus"):
        c.quota.set(cohort="c", borrowing_limit={"gpus": 4})
    assert len(t.requests) == 1
