"""Who may submit, and how fast: the tokens file and a token bucket per client.

The tokens file (``kernelgate serve --tokens FILE``) is JSON::

    {"clients": [
      {"name": "rl-trainer", "token": "kg_...", "rate_per_s": 50, "burst": 2000},
      {"name": "dashboard", "token_sha256": "<hex sha256 of the token>", "rate_per_s": 1, "burst": 20}
    ]}

``token`` holds the secret itself; ``token_sha256`` only its digest (so the
file does not hold the secret). ``rate_per_s`` is the sustained number of
*candidates* a client may submit per second and ``burst`` the most it may
submit at once (one batch of 500 candidates needs a burst of at least 500).
``kernelgate serve --add-client NAME --tokens FILE`` creates a token and adds
an entry. Tokens are compared as sha256 digests with
:func:`hmac.compare_digest`, so a lookup takes the same time whichever byte
differs.

The rate limit is a token bucket: ``burst`` candidates of credit, refilled
at ``rate_per_s``; a submission of n candidates takes n credits or is
refused with the seconds until they are there (HTTP 429 ``Retry-After``).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.jsonio import loads, write_json

DEFAULT_RATE_PER_S = 20.0
DEFAULT_BURST = 1000
TOKEN_PREFIX = "kg_"


class TokensFileError(ValueError):
    """A tokens file that cannot be used; the message names the file, the entry and the field."""


@dataclass(frozen=True, slots=True)
class Client:
    """One client of the tokens file."""

    name: str
    """Shown in health and logs; the default generator name of its submissions."""
    token_sha256: str
    rate_per_s: float
    """Sustained candidates per second."""
    burst: int
    """Most candidates at once (bucket size)."""

    def to_dict(self) -> dict:
        return {"name": self.name, "token_sha256": self.token_sha256, "rate_per_s": self.rate_per_s, "burst": self.burst}


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random token (192 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


class TokenTable:
    """The clients of one tokens file, looked up by token."""

    def __init__(self, clients: list[Client], source: str = "<memory>"):
        self.clients = clients
        self.source = source
        names = [c.name for c in clients]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise TokensFileError(f"{source}: client name(s) {dup} appear more than once; names must be unique")

    @classmethod
    def from_file(cls, path: str | Path) -> "TokenTable":
        path = Path(path)
        try:
            data = loads(path.read_bytes())
        except OSError as exc:
            raise TokensFileError(f"{path}: cannot be read ({exc.strerror}); create it with "
                                  "'kernelgate serve --add-client NAME --tokens FILE'") from None
        except ValueError as exc:
            raise TokensFileError(f"{path}: not valid JSON ({exc}); expected {{\"clients\": [{{\"name\": ..., "
                                  "\"token\": ...}]}") from None
        if not isinstance(data, dict) or not isinstance(data.get("clients"), list):
            raise TokensFileError(f"{path}: expected a JSON object with a 'clients' list")
        clients = []
        for i, entry in enumerate(data["clients"]):
            where = f"{path}: clients[{i}]"
            if not isinstance(entry, dict):
                raise TokensFileError(f"{where}: expected an object with 'name' and 'token' or 'token_sha256'")
            unknown = sorted(set(entry) - {"name", "token", "token_sha256", "rate_per_s", "burst"})
            if unknown:
                raise TokensFileError(f"{where}: unknown field(s) {unknown}; known: name, token, token_sha256, "
                                      "rate_per_s, burst")
            name = entry.get("name")
            if not isinstance(name, str) or not name.strip():
                raise TokensFileError(f"{where}.name: must be a non-empty string")
            if ("token" in entry) == ("token_sha256" in entry):
                raise TokensFileError(f"{where}: give exactly one of 'token' and 'token_sha256'")
            if "token" in entry:
                tok = entry["token"]
                if not isinstance(tok, str) or len(tok) < 16:
                    raise TokensFileError(f"{where}.token: must be a string of at least 16 characters "
                                          "(make one with 'kernelgate serve --add-client')")
                sha = digest(tok)
            else:
                sha = entry["token_sha256"]
                if not isinstance(sha, str) or len(sha) != 64 or any(ch not in "0123456789abcdef" for ch in sha):
                    raise TokensFileError(f"{where}.token_sha256: must be 64 lowercase hex digits (sha256 of the token)")
            rate = entry.get("rate_per_s", DEFAULT_RATE_PER_S)
            burst = entry.get("burst", DEFAULT_BURST)
            if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not math.isfinite(rate) or rate <= 0:
                raise TokensFileError(f"{where}.rate_per_s: must be a positive number (candidates per second)")
            if not isinstance(burst, int) or isinstance(burst, bool) or burst < 1:
                raise TokensFileError(f"{where}.burst: must be a positive integer (candidates at once)")
            clients.append(Client(name.strip(), sha, float(rate), burst))
        return cls(clients, str(path))

    def lookup(self, token: str) -> Client | None:
        """The client holding ``token``, or None (every entry is compared, in constant time each)."""
        want = digest(token)
        found = None
        for c in self.clients:
            if hmac.compare_digest(c.token_sha256, want):
                found = c
        return found


def add_client(path: str | Path, name: str, rate_per_s: float = DEFAULT_RATE_PER_S, burst: int = DEFAULT_BURST) -> str:
    """Add a client with a fresh token to the tokens file (created if absent); return the token.

    The file stores only the token's sha256. Raises TokensFileError when the
    name is taken or the file is not a tokens file.
    """
    path = Path(path)
    data: dict = {"clients": []}
    if path.exists():
        TokenTable.from_file(path)
        data = loads(path.read_bytes())
    if any(e.get("name") == name for e in data["clients"]):
        raise TokensFileError(f"{path}: a client named {name!r} exists already; choose another name")
    token = new_token()
    data["clients"].append({"name": name, "token_sha256": digest(token), "rate_per_s": rate_per_s, "burst": burst})
    write_json(path, data)
    path.chmod(0o600)
    TokenTable.from_file(path)  # what was written must load
    return token


class RateLimiter:
    """A token bucket per client name (thread-safe); see the module docstring."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._level: dict[str, tuple[float, float]] = {}

    def take(self, client: Client, n: int) -> float:
        """Take ``n`` credits: 0.0 on success, else the seconds until ``n`` credits are there (nothing taken)."""
        with self._lock:
            now = self._clock()
            level, last = self._level.get(client.name, (float(client.burst), now))
            level = min(float(client.burst), level + (now - last) * client.rate_per_s)
            if n <= level:
                self._level[client.name] = (level - n, now)
                return 0.0
            self._level[client.name] = (level, now)
            return (n - level) / client.rate_per_s

    def refund(self, client: Client, n: int) -> None:
        """Give back ``n`` credits (a submission taken but then not queued)."""
        with self._lock:
            now = self._clock()
            level, last = self._level.get(client.name, (float(client.burst), now))
            self._level[client.name] = (min(float(client.burst), level + n), last)


__all__ = ["Client", "RateLimiter", "TokenTable", "TokensFileError", "add_client", "digest", "new_token"]
