"""The client's traffic against the API's OpenAPI document: every request the server
accepted and every answer (JSON bodies and each line of JSON-lines streams) is validated
with jsonschema (Debian's python3-jsonschema; the document is OpenAPI 3.1, whose schemas
are JSON Schema 2020-12), and every answer's status must be documented for its route.
test_client_stack.py records its calls with Recorder and calls check at the end."""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from typing import Any, Dict, List, Tuple

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# The document's known mismatches with the server's real answers, as check() names them:
# (operationId, "request" or the status, the failing JSON Schema keyword, the path in the
# body). Issue 37 item 1 is to fix the document; remove each entry as it is fixed (the
# test warns about entries that no longer occur).
KNOWN_MISMATCHES: set = set()  # all fixed: docs/openapi.json describes the server (issue 37)


class Recorder:
    """Wraps transports so that every call is recorded: method, URL, request body and
    content type, status, and the answer's body or streamed lines."""

    def __init__(self) -> None:
        self.records: List[Dict[str, Any]] = []

    def wrap(self, inner: Any) -> Any:
        rec = self

        class Recording:
            def request(self, method, url, headers, body, stream, timeout):  # type: ignore[no-untyped-def]
                resp = inner.request(method, url, headers, body, stream, timeout)
                r: Dict[str, Any] = {"method": method, "url": url, "status": resp.status,
                                     "content_type": headers.get("Content-Type", ""), "body": body,
                                     "stream": stream and resp.status < 300}
                rec.records.append(r)
                if r["stream"]:
                    lines = resp.iter_lines
                    r["lines"] = []

                    def recorded():  # type: ignore[no-untyped-def]
                        for line in lines():
                            if line.strip():
                                r["lines"].append(line)
                            yield line
                    resp.iter_lines = recorded
                else:
                    data = resp.read()
                    r["answer"] = data
                    resp.read = lambda: data
                return resp

            def close(self) -> None:
                inner.close()
        return Recording()


def load_document(client: Any) -> Tuple[Dict[str, Any], str]:
    """The document the server serves at /v1/openapi.json, else docs/openapi.json."""
    try:
        return client._call("GET", "/v1/openapi.json"), "the served /v1/openapi.json"
    except Exception:  # noqa: BLE001 - not served (yet): the repository's
        with open(os.path.join(REPO, "docs", "openapi.json")) as f:
            return json.load(f), "docs/openapi.json"


def check(doc: Dict[str, Any], records: List[Dict[str, Any]]) -> Tuple[Dict[Tuple[str, ...], int], set]:
    """The mismatches (name -> how many times) and the operations the records cover."""
    import jsonschema  # python3-jsonschema

    routes = []
    for path, ops in doc["paths"].items():
        rx = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
        for method, op in ops.items():
            if method in ("get", "post", "put", "delete", "patch"):
                routes.append((method.upper(), rx, path.count("{"), op))

    def validator(schema: Dict[str, Any]) -> Any:
        return jsonschema.Draft202012Validator({**schema, "components": doc.get("components", {})})

    def response(op: Dict[str, Any], status: str) -> Dict[str, Any]:
        r = op["responses"].get(status) or op["responses"].get("default") or {}
        while "$ref" in r:
            r = doc["components"]["responses"][r["$ref"].rsplit("/", 1)[-1]]
        return r

    found: Dict[Tuple[str, ...], int] = {}
    operations = set()

    def add(key: Tuple[str, ...]) -> None:
        found[key] = found.get(key, 0) + 1

    def validate(opid: str, where: str, schema: Dict[str, Any], value: Any) -> None:
        for e in validator(schema).iter_errors(value):
            add((opid, where, str(e.validator), "/".join(str(p) for p in e.absolute_path)))

    for r in records:
        u = urllib.parse.urlparse(r["url"])
        ops = sorted((n, op) for m, rx, n, op in routes if m == r["method"] and rx.match(u.path))
        if not ops:
            add(("no route", r["method"], u.path, ""))
            continue
        op = ops[0][1]
        opid = op.get("operationId", r["method"] + " " + u.path)
        operations.add(opid)
        status = str(r["status"])
        if status not in op["responses"]:
            add((opid, "status", status, ""))
        # requests the server accepted (the tests also send refused ones on purpose)
        if r["body"] and r["status"] < 300 and r["content_type"] == "application/json":
            media = op.get("requestBody", {}).get("content", {}).get("application/json")
            if media is None:
                add((opid, "request", "undocumented body", ""))
            else:
                validate(opid, "request", media["schema"], json.loads(r["body"]))
        content = response(op, status).get("content", {})
        if r["stream"]:
            media, bodies = content.get("application/x-ndjson"), [json.loads(x) for x in r["lines"]]
        else:
            raw = r.get("answer") or b""
            media, bodies = content.get("application/json"), ([json.loads(raw)] if raw.strip() else [])
        if bodies and media is None:
            add((opid, status, "undocumented body", ""))
            continue
        for b in bodies:
            validate(opid, status, media["schema"], b)
    return found, operations
