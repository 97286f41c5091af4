"""HTTP routes of the evaluation service (FastAPI), a thin layer over :class:`harness.serve.service.Service`.

::

    GET  /v1/health                  queue depth, lanes (per GPU), environment, throughput    (no token)
    GET  /v1/problems                the problems clients may name, with their workloads
    POST /v1/tasks                   one candidate                   -> 202 {"task_id", "state", "deduplicated", ...}
    POST /v1/batches                 {"candidates": [...], defaults} -> 202 {"tasks": [...]}
    GET  /v1/tasks/{id}              ?wait_s=30&include=records,reward,feedback   (long-poll until done)
    POST /v1/tasks/query             {"task_ids": [...], "wait_s": 30, "until": "all"|"any",
                                      "include": [...], "reward": {RewardConfig fields}}

Every route but health needs ``Authorization: Bearer <token>``. Errors are
``{"error": {"status", "field", "message"}}`` with 400 (malformed JSON), 401
(token), 403 (not allowed), 404 (unknown task or route), 413 (too large),
422 (invalid field), 429 (rate limit or full queue, with ``Retry-After``),
503 (shutting down). Bodies are JSON written by :func:`harness.jsonio.dumps`
(non-finite floats as ``"nan"``/``"inf"``, as in results.jsonl).
Submissions and reads run in the thread pool (SQLite); long-polls wait on an
event the lanes set, holding no thread.

(No ``from __future__ import annotations`` here: FastAPI reads the route
functions' annotations, and ``Request`` is imported inside :func:`create_app`
so that importing this module does not import FastAPI.)
"""

import asyncio
import json
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from harness.jsonio import dumps
from harness.serve.submission import RequestError
from harness.serve.service import DEFAULT_INCLUDE, INCLUDE, Service

if TYPE_CHECKING:
    from fastapi import FastAPI, Request

MAX_QUERY_IDS = 10_000
"""Most task ids in one query (a response of 10,000 tasks with records is tens of MB)."""
ROUTES = ("GET /v1/health", "GET /v1/problems", "POST /v1/tasks", "POST /v1/batches", "GET /v1/tasks/{task_id}",
          "POST /v1/tasks/query")


def _json(obj: Any, status: int = 200, headers: "dict[str, str] | None" = None):
    from fastapi.responses import Response

    return Response(content=dumps(obj), status_code=status, media_type="application/json", headers=headers)


async def _body(request: "Request", limit: int) -> Any:
    """The request's JSON body, refusing more than ``limit`` bytes before reading them all."""
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit:
        raise RequestError(413, "body", f"{length} bytes; at most {limit} per request (kernelgate serve --max-body-bytes); "
                           "split the batch")
    chunks, n = [], 0
    async for chunk in request.stream():
        n += len(chunk)
        if n > limit:
            raise RequestError(413, "body", f"more than {limit} bytes per request; split the batch")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        raise RequestError(400, "body", 'empty; send a JSON object such as {"source": "...", "problem": "gelu"}')
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise RequestError(400, "body", f"not UTF-8 (byte {exc.start}); send JSON text in UTF-8") from None
    except json.JSONDecodeError as exc:
        raise RequestError(400, "body", f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; "
                           'send a JSON object such as {"source": "...", "problem": "gelu"}') from None


def _include(items: Any, field: str) -> "tuple[str, ...]":
    if items is None:
        return DEFAULT_INCLUDE
    if isinstance(items, str):
        items = [x for x in items.split(",") if x]
    if not isinstance(items, list) or any(x not in INCLUDE for x in items):
        raise RequestError(422, field, f"{items!r:.80} : expected a list of {list(INCLUDE)}")
    return tuple(items)


def _wait_s(value: Any, field: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise RequestError(422, field, f"{value!r:.40} is not a number of seconds") from None
    if not 0 <= v < float("inf"):
        raise RequestError(422, field, f"{v} must be >= 0 seconds")
    return v


def _reward(value: Any):
    from harness.score.reward import RewardConfig

    try:
        return RewardConfig.from_dict(value)
    except (ValueError, TypeError) as exc:
        raise RequestError(422, "reward", str(exc)) from None


def create_app(service: Service) -> "FastAPI":
    """The FastAPI application of ``service``; starting it recovers the queue and starts the lanes."""
    from fastapi import FastAPI, Request
    from starlette.concurrency import run_in_threadpool
    from starlette.exceptions import HTTPException

    from harness import __version__

    @asynccontextmanager
    async def lifespan(_app):
        await run_in_threadpool(service.start, asyncio.get_running_loop())
        yield
        await run_in_threadpool(service.stop)

    app = FastAPI(title="KernelGate evaluation service", version=__version__, lifespan=lifespan,
                  description="Evaluate Triton/TileLang candidates; see docs/service.md")

    @app.exception_handler(RequestError)
    async def _request_error(_request, exc: RequestError):
        return _json(exc.to_dict(), exc.status, exc.headers)

    @app.exception_handler(HTTPException)
    async def _http_error(request, exc: HTTPException):
        msg = (f"no route {request.method} {request.url.path}; routes: {', '.join(ROUTES)}"
               if exc.status_code in (404, 405) else str(exc.detail))
        return _json({"error": {"status": exc.status_code, "field": "", "message": msg}}, exc.status_code)

    def client_of(request: Request):
        if not service.config.auth:
            return None
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise RequestError(401, "Authorization", "missing; send 'Authorization: Bearer <token>' with a token from "
                               "the service's tokens file (ask its operator)", {"WWW-Authenticate": "Bearer"})
        assert service.tokens is not None
        client = service.tokens.lookup(token.strip())
        if client is None:
            raise RequestError(401, "Authorization", "unknown token; check it against the service's tokens file",
                               {"WWW-Authenticate": "Bearer"})
        return client

    @app.get("/v1/health")
    async def health():
        return _json(await run_in_threadpool(service.health))

    @app.get("/v1/problems")
    async def problems(request: Request):
        client_of(request)
        return _json({"problems": service.problems()})

    @app.post("/v1/tasks")
    async def submit_one(request: Request):
        client = client_of(request)
        body = await _body(request, service.config.limits.max_body_bytes)
        out = await run_in_threadpool(service.submit, client, body, batch=False)
        return _json(out[0], 202)

    @app.post("/v1/batches")
    async def submit_batch(request: Request):
        client = client_of(request)
        body = await _body(request, service.config.limits.max_body_bytes)
        out = await run_in_threadpool(service.submit, client, body, batch=True)
        return _json({"tasks": out}, 202)

    @app.get("/v1/tasks/{task_id}")
    async def get_task(request: Request, task_id: str):
        client_of(request)
        q = request.query_params
        unknown = sorted(set(q) - {"wait_s", "include"})
        if unknown:
            raise RequestError(422, unknown[0], "unknown query parameter; known: wait_s, include")
        include = _include(q.get("include"), "include")
        tasks = await service.wait([task_id], until="all", wait_s=_wait_s(q.get("wait_s", 0), "wait_s"))
        view = await run_in_threadpool(service.view, tasks[task_id], include, None)
        return _json(view)

    @app.post("/v1/tasks/query")
    async def query(request: Request):
        client_of(request)
        body = await _body(request, service.config.limits.max_body_bytes)
        if not isinstance(body, dict):
            raise RequestError(422, "body", 'expected a JSON object like {"task_ids": ["t..."], "wait_s": 30}')
        unknown = sorted(set(body) - {"task_ids", "wait_s", "until", "include", "reward"})
        if unknown:
            raise RequestError(422, unknown[0], "unknown field; known: task_ids, wait_s, until, include, reward")
        ids = body.get("task_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(t, str) for t in ids):
            raise RequestError(422, "task_ids", "expected a non-empty list of task id strings")
        if len(ids) > MAX_QUERY_IDS:
            raise RequestError(413, "task_ids", f"{len(ids)} ids; at most {MAX_QUERY_IDS} per query")
        until = body.get("until", "all")
        if until not in ("all", "any"):
            raise RequestError(422, "until", f"{until!r:.40}: expected 'all' or 'any'")
        include = _include(body.get("include"), "include")
        cfg = _reward(body.get("reward"))
        tasks = await service.wait(ids, until=until, wait_s=_wait_s(body.get("wait_s", 0), "wait_s"))

        def views():
            return [service.view(tasks[t], include, cfg) for t in dict.fromkeys(ids)]
        out = await run_in_threadpool(views)
        done = sum(1 for v in out if v["state"] == "done")
        return _json({"tasks": out, "done": done, "pending": len(out) - done})

    return app


def run_server(service: Service, host: str, port: int, *, log_level: str = "info", access_log: bool = False) -> None:
    """Serve ``service`` with uvicorn until SIGINT/SIGTERM (then running batches get ``drain_s`` to finish)."""
    import uvicorn

    config = uvicorn.Config(create_app(service), host=host, port=port, log_level=log_level, access_log=access_log,
                            lifespan="on", timeout_graceful_shutdown=int(service.config.drain_s) + 5)
    uvicorn.Server(config).run()


__all__ = ["MAX_QUERY_IDS", "ROUTES", "create_app", "run_server"]
