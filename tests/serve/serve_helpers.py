"""Helpers of the service tests: a real uvicorn process on loopback, reached over real HTTP (httpx)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent / "serve_fakes.py"
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789", "slow": "slow-token-0123456789"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_tokens(path: Path) -> Path:
    clients = [{"name": "alice", "token": TOKENS["alice"], "rate_per_s": 1000, "burst": 1000},
               {"name": "bob", "token": TOKENS["bob"], "rate_per_s": 1000, "burst": 1000},
               {"name": "slow", "token": TOKENS["slow"], "rate_per_s": 0.5, "burst": 3}]
    path.write_text(json.dumps({"clients": clients}))
    return path


@dataclass
class Server:
    """One service process; ``url`` answers once ``start`` returns."""

    argv: list
    port: int
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> "Server":
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, env=env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/v1/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not answer in {timeout_s} s:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the server process (no shutdown code runs) and reap it."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def fake_server(results: Path, *extra: str, tokens: Path | None = None) -> Server:
    port = free_port()
    argv = [sys.executable, str(FAKES), "--results", str(results), "--port", str(port), *extra]
    if tokens is not None:
        argv += ["--tokens", str(tokens)]
    return Server(argv, port, results.parent / f"server-{port}.log")


def client(url: str, who: str | None = "alice"):
    headers = {"Authorization": f"Bearer {TOKENS[who]}"} if who else {}
    return httpx.Client(base_url=url, headers=headers, timeout=60)


GELU = (ROOT / "submissions" / "triton-reference" / "gelu.py").read_text()


def variant(source: str, k: int) -> str:
    """The same kernel with a different hash (a trailing comment)."""
    return source + f"\n# variant {k}\n"
