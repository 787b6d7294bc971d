"""Where the client finds its server and token: the same places as the ``dlc`` CLI.

- server: the argument, else ``$DLC_SERVER``, else ``http://127.0.0.1:8480`` (where
  ``dlc up`` serves by default);
- token: the argument, else ``$DLC_TOKEN``, else the admin token ``dlc up`` wrote in its
  default state directory (``$XDG_STATE_HOME/opendlc/admin-token``, else
  ``~/.local/state/opendlc/admin-token``) when that file exists;
- CA certificate of an https server: the argument, else ``$DLC_CA_CERT``.

(cmd/dlc/main.go's serverURL, cmd/dlc/auth.go's resolveToken and caFile,
embedded.DefaultDir.)"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional

from .errors import ConfigError

DEFAULT_API_ADDR = "127.0.0.1:8480"
ADMIN_TOKEN_FILE = "admin-token"
TOKEN_PREFIX = "dlc_"

__all__ = ["Config", "default_state_dir", "resolve"]


@dataclass(frozen=True)
class Config:
    server: str
    token: str
    ca_cert: str
    # token_source says where the token came from: "argument", "DLC_TOKEN", a file
    # path, or "" for none.
    token_source: str = ""


def default_state_dir(environ: Optional[Mapping[str, str]] = None) -> str:
    """``dlc up``'s default state directory (embedded.DefaultDir)."""
    environ = os.environ if environ is None else environ
    if environ.get("XDG_STATE_HOME"):
        return os.path.join(environ["XDG_STATE_HOME"], "opendlc")
    home = environ.get("HOME")
    if not home:  # Go's os.UserHomeDir fails without $HOME: os.TempDir()/opendlc
        return os.path.join(environ.get("TMPDIR") or "/tmp", "opendlc")
    return os.path.join(home, ".local", "state", "opendlc")


def read_token_file(path: str) -> str:
    """The token in path, as ``dlc up`` writes it (auth.ReadTokenFile)."""
    with open(path, encoding="utf-8") as f:
        token = f.read().strip()
    if not token.startswith(TOKEN_PREFIX):
        raise ConfigError(f"{path} does not hold an OpenDLC token (want {TOKEN_PREFIX}...)")
    return token


def resolve(server: Optional[str] = None, token: Optional[str] = None, ca_cert: Optional[str] = None,
            environ: Optional[Mapping[str, str]] = None) -> Config:
    """The server, token and CA the CLI would use with these flags."""
    environ = os.environ if environ is None else environ
    server = server or environ.get("DLC_SERVER") or "http://" + DEFAULT_API_ADDR
    server = server.rstrip("/")
    if "://" not in server or not server.split("://", 1)[1]:
        raise ConfigError(f"invalid server address {server!r}: want http(s)://host:port")
    source = ""
    if token:
        source = "argument"
    elif environ.get("DLC_TOKEN"):
        token, source = environ["DLC_TOKEN"], "DLC_TOKEN"
    else:
        path = os.path.join(default_state_dir(environ), ADMIN_TOKEN_FILE)
        try:
            token, source = read_token_file(path), path
        except FileNotFoundError:
            token = ""
        except (OSError, ConfigError) as e:  # the CLI warns and goes on without a token
            import warnings
            warnings.warn(f"opendlc.client: {e}", stacklevel=3)
            token = ""
    ca = ca_cert or environ.get("DLC_CA_CERT") or ""
    if ca and not os.path.isfile(ca):
        raise ConfigError(f"CA file {ca}: no such file")
    return Config(server=server, token=token or "", ca_cert=ca, token_source=source)
