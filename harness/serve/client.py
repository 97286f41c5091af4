"""A small client of the evaluation service (httpx), for training loops and tools.

::

    from harness.serve.client import ServiceClient
    with ServiceClient("http://gpu-host:8321", token="kg_...") as kg:
        ids = kg.submit_batch([{"source": s, "problem": "gelu"} for s in sources], preset="quick")
        for task in kg.wait(ids, include=("reward", "feedback")):
            task["reward"]["value"], task["feedback"]

Back-pressure is handled here: a 429 (rate limit or full queue) is retried
after the server's ``Retry-After`` until ``submit_timeout_s`` has passed;
any other error raises :class:`ServiceError` with the server's message (it
names the field and the fix).
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Sequence


class ServiceError(RuntimeError):
    """A refusal of the service: HTTP status, the field it names and its message."""

    def __init__(self, status: int, field: str, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.field, self.message = status, field, message


class ServiceClient:
    """One connection pool to one service (thread-safe as httpx.Client is; one per process is enough)."""

    def __init__(self, url: str, token: str | None = None, *, timeout_s: float = 120.0, submit_timeout_s: float = 600.0):
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s)
        self.submit_timeout_s = submit_timeout_s
        self.throttled = 0
        """How many 429 answers this client has waited out."""

    def __enter__(self) -> "ServiceClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, *, retry_429: bool = False, **kw: Any) -> Any:
        deadline = time.monotonic() + self.submit_timeout_s
        while True:
            resp = self._http.request(method, path, **kw)
            if resp.status_code == 429 and retry_429:
                wait = float(resp.headers.get("retry-after", "1"))
                if time.monotonic() + wait < deadline:
                    self.throttled += 1
                    time.sleep(wait)
                    continue
            if resp.status_code >= 400:
                try:
                    err = resp.json()["error"]
                    raise ServiceError(resp.status_code, err.get("field", ""), err.get("message", resp.text))
                except (ValueError, KeyError, TypeError):
                    raise ServiceError(resp.status_code, "", resp.text[:500]) from None
            return resp.json()

    def health(self) -> dict:
        return self._request("GET", "/v1/health")

    def problems(self) -> list[dict]:
        return self._request("GET", "/v1/problems")["problems"]

    def submit(self, source: str, problem: str, **fields: Any) -> dict:
        """Queue one candidate; the server's summary (``task_id``, ``state``, ``deduplicated``, ...)."""
        return self._request("POST", "/v1/tasks", json={"source": source, "problem": problem, **fields}, retry_429=True)

    def submit_batch(self, candidates: Sequence[dict], **defaults: Any) -> list[str]:
        """Queue candidates (dicts with ``source`` and ``problem`` or ``problem_source``); their task ids, in order."""
        out = self._request("POST", "/v1/batches", json={"candidates": list(candidates), **defaults}, retry_429=True)
        return [t["task_id"] for t in out["tasks"]]

    def query(self, task_ids: Sequence[str], *, wait_s: float = 0.0, until: str = "all",
              include: Iterable[str] = ("records", "reward"), reward: dict | None = None) -> list[dict]:
        """The tasks' views, after waiting up to ``wait_s`` for ``until`` ("all"/"any") to be done."""
        body: dict = {"task_ids": list(task_ids), "wait_s": wait_s, "until": until, "include": list(include)}
        if reward is not None:
            body["reward"] = reward
        return self._request("POST", "/v1/tasks/query", json=body)["tasks"]

    def wait(self, task_ids: Sequence[str], *, timeout_s: float = 3600.0, poll_s: float = 30.0,
             include: Iterable[str] = ("records", "reward"), reward: dict | None = None) -> list[dict]:
        """Long-poll until every task is done (TimeoutError after ``timeout_s``); their views, in order."""
        deadline = time.monotonic() + timeout_s
        include = tuple(include)
        pending = list(dict.fromkeys(task_ids))
        done: dict[str, dict] = {}
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{len(pending)} of {len(task_ids)} task(s) not done after {timeout_s:.0f} s")
            views = self.query(pending, wait_s=min(poll_s, left), until="any", include=include, reward=reward)
            for v in views:
                if v["state"] == "done":
                    done[v["task_id"]] = v
            pending = [t for t in pending if t not in done]
        return [done[t] for t in task_ids]


__all__ = ["ServiceClient", "ServiceError"]
