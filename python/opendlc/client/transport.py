"""HTTP transports. The client needs one method, :meth:`Transport.request`, which
answers a :class:`Response` for every status (errors included) and raises
:class:`TransportError` only when no answer came. :class:`RequestsTransport` (Debian's
python3-requests) is the default; :class:`UrllibTransport` uses the standard library
alone, for an interpreter without requests. Tests may pass a fake."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from typing import Any, Iterator, Mapping, Optional, Protocol, Tuple, Union

from .errors import TransportError

__all__ = ["Response", "Transport", "RequestsTransport", "UrllibTransport", "default_transport"]

# Timeout is (connect, read) seconds; read None waits for ever (a followed stream).
Timeout = Tuple[float, Optional[float]]


class Response(Protocol):
    status: int
    headers: Mapping[str, str]

    def read(self) -> bytes: ...

    def iter_lines(self) -> Iterator[bytes]: ...

    def close(self) -> None: ...


class Transport(Protocol):
    def request(self, method: str, url: str, headers: Mapping[str, str], body: Optional[bytes],
                stream: bool, timeout: Timeout) -> Response: ...


class _RequestsResponse:
    def __init__(self, resp: Any, method: str, url: str):
        self._resp = resp
        self._what = f"{method} {url}"
        self.status = resp.status_code
        self.headers = resp.headers

    def read(self) -> bytes:
        import requests  # type: ignore[import]
        try:
            return self._resp.content
        except requests.RequestException as e:
            raise TransportError(f"{self._what}: {e}") from e

    def iter_lines(self) -> Iterator[bytes]:
        import requests  # type: ignore[import]
        try:
            # chunk_size None: hand over each chunk as it arrives (a followed stream is
            # written a line at a time and flushed, each a chunk).
            for line in self._resp.iter_lines(chunk_size=None):
                yield line
        except requests.RequestException as e:
            raise TransportError(f"{self._what}: the stream broke: {e}") from e

    def close(self) -> None:
        self._resp.close()


class RequestsTransport:
    """A transport on a requests.Session (connection reuse); ``verify`` is a CA file
    or True for the system's roots."""

    def __init__(self, verify: Union[bool, str] = True, session: Any = None):
        import requests  # type: ignore[import]
        self._session = session or requests.Session()
        self._verify = verify

    def request(self, method: str, url: str, headers: Mapping[str, str], body: Optional[bytes],
                stream: bool, timeout: Timeout) -> Response:
        import requests  # type: ignore[import]
        try:
            resp = self._session.request(method, url, headers=dict(headers), data=body, stream=stream,
                                         timeout=timeout, verify=self._verify)
        except requests.RequestException as e:
            raise TransportError(f"{method} {url}: {e}") from e
        return _RequestsResponse(resp, method, url)

    def close(self) -> None:
        self._session.close()


class _UrllibResponse:
    def __init__(self, resp: Any, status: int, method: str, url: str):
        self._resp = resp
        self._what = f"{method} {url}"
        self.status = status
        self.headers = resp.headers

    def read(self) -> bytes:
        try:
            return self._resp.read()
        except OSError as e:
            raise TransportError(f"{self._what}: {e}") from e

    def iter_lines(self) -> Iterator[bytes]:
        try:
            while True:
                line = self._resp.readline()
                if not line:
                    return
                yield line.rstrip(b"\r\n")
        except OSError as e:
            raise TransportError(f"{self._what}: the stream broke: {e}") from e

    def close(self) -> None:
        self._resp.close()


class UrllibTransport:
    """A transport on the standard library's urllib: no dependencies."""

    def __init__(self, cafile: str = ""):
        self._ctx = ssl.create_default_context(cafile=cafile or None)

    def request(self, method: str, url: str, headers: Mapping[str, str], body: Optional[bytes],
                stream: bool, timeout: Timeout) -> Response:
        req = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        t = timeout[1] if timeout[1] is not None else None
        try:
            resp = urllib.request.urlopen(req, timeout=t, context=self._ctx if url.startswith("https:") else None)
            return _UrllibResponse(resp, resp.status, method, url)
        except urllib.error.HTTPError as e:  # an answer with an error status
            return _UrllibResponse(e, e.code, method, url)
        except (urllib.error.URLError, OSError) as e:
            raise TransportError(f"{method} {url}: {e}") from e

    def close(self) -> None:
        pass


def default_transport(ca_cert: str = "") -> Transport:
    """RequestsTransport where requests is installed, else UrllibTransport."""
    try:
        import requests  # type: ignore[import]  # noqa: F401
    except ImportError:
        return UrllibTransport(ca_cert)
    return RequestsTransport(verify=ca_cert or True)
