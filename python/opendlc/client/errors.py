"""The client's errors. Every answer of the server that is not a success becomes an
:class:`APIError` of the class its status names, carrying the server's error body: a
code, a message and, for a refused spec, the path of every field at fault
(``err.fields == ["spec.roles.worker.replicas"]``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Type

__all__ = [
    "OpenDLCError", "ConfigError", "TransportError", "WaitTimeout", "FieldError",
    "APIError", "InvalidRequestError", "InvalidSpecError", "UnauthenticatedError",
    "PermissionDeniedError", "NotFoundError", "ConflictError", "AlreadyExistsError",
    "FailedPreconditionError", "RequestTooLargeError", "RateLimitedError",
    "ServerError", "UnavailableError", "error_from_response",
]


class OpenDLCError(Exception):
    """The base of every error the client raises."""


class ConfigError(OpenDLCError):
    """The client's configuration is unusable: a bad server URL, an unreadable CA or
    token file."""


class TransportError(OpenDLCError):
    """The server could not be reached, or the connection broke before an answer."""


class WaitTimeout(OpenDLCError, TimeoutError):
    """wait() ran out of time before the object reached a terminal phase. ``last`` is
    the object as last read."""

    def __init__(self, message: str, last: Any = None):
        super().__init__(message)
        self.last = last


@dataclass(frozen=True)
class FieldError:
    """One field at fault: its path in the document (``spec.roles.worker.replicas``;
    ``""`` for the document as a whole) and what is expected (``must be >= 1``)."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class APIError(OpenDLCError):
    """An error answered by the server: ``status`` (the HTTP status), ``code`` (such as
    ``InvalidSpec``, ``NotFound``), ``message`` and ``details`` (the fields at fault)."""

    status: int = 0

    def __init__(self, status: int, code: str, message: str,
                 details: Optional[List[FieldError]] = None, method: str = "", url: str = ""):
        self.status = status
        self.code = code
        self.message = message
        self.details: List[FieldError] = list(details or [])
        self.method = method
        self.url = url
        super().__init__(self._text())

    @property
    def fields(self) -> List[str]:
        """The paths of the fields at fault, in the server's order."""
        return [d.field for d in self.details]

    def _text(self) -> str:
        head = f"{self.status} {self.code}: {self.message}"
        return "\n  ".join([head] + [str(d) for d in self.details])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, message={self.message!r}, fields={self.fields!r})"


class InvalidRequestError(APIError):
    """400 or 422: the request or its document is not acceptable."""


class InvalidSpecError(InvalidRequestError):
    """The document does not decode or validate (code ``InvalidSpec``): ``fields`` names
    every field at fault."""


class UnauthenticatedError(APIError):
    """401: no token, or a malformed, unknown, revoked or expired one."""


class PermissionDeniedError(APIError):
    """403: the token's role or workspace does not allow the call."""


class NotFoundError(APIError):
    """404: no such object (or one in a workspace the token cannot see)."""


class ConflictError(APIError):
    """409: the object's state does not allow the call."""


class AlreadyExistsError(ConflictError):
    """409 ``AlreadyExists``: an object of that name exists."""


class FailedPreconditionError(ConflictError):
    """409 ``FailedPrecondition``: the object is not in a state that allows the call
    (resuming a running experiment, deleting a workspace that holds jobs)."""


class RequestTooLargeError(InvalidRequestError):
    """413: the request body is over the server's limit."""


class RateLimitedError(APIError):
    """429: too many failed authentications from this address."""


class ServerError(APIError):
    """5xx: the server failed."""


class UnavailableError(ServerError):
    """503: the server (or Temporal behind it) is unavailable for now; retrying may
    succeed."""


_BY_STATUS: Dict[int, Type[APIError]] = {
    400: InvalidRequestError, 401: UnauthenticatedError, 403: PermissionDeniedError,
    404: NotFoundError, 409: ConflictError, 413: RequestTooLargeError, 422: InvalidRequestError,
    429: RateLimitedError, 503: UnavailableError,
}

_BY_CODE: Dict[str, Type[APIError]] = {
    "InvalidSpec": InvalidSpecError, "AlreadyExists": AlreadyExistsError,
    "FailedPrecondition": FailedPreconditionError,
}


def error_from_response(status: int, body: bytes, method: str = "", url: str = "",
                        reason: str = "") -> APIError:
    """The APIError of an answer: the server's ``{"error": {...}}`` body, or the raw
    text of a body that is not one (a proxy's answer)."""
    code, message, details = reason or str(status), "", []
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
    except (ValueError, UnicodeDecodeError):
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict) and err.get("message"):
        code = str(err.get("code") or code)
        message = str(err["message"])
        for d in err.get("details") or []:
            if isinstance(d, dict):
                details.append(FieldError(str(d.get("field", "")), str(d.get("message", ""))))
    else:
        message = body.decode("utf-8", "replace").strip() if body else (reason or "")
    cls = _BY_CODE.get(code)
    if cls is None or not issubclass(cls, _BY_STATUS.get(status, APIError)):
        cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    return cls(status, code, message, details, method, url)
