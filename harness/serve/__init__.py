"""The evaluation service: many clients, one queue, the same isolation as ``kernelgate run``.

Layout (one module, one job)::

    presets.py     named evaluation settings (quick / standard / thorough) -> RunOptions
    submission.py  typed, validated submissions (what a client may ask for; errors name the field)
    engine.py      the one adapter to the engine (harness.pipeline.evaluate): candidates in, records out
    problem_probe.py  loads a client's problem file in a subprocess (never in the service's process)
    store.py       the durable queue and record index (SQLite, WAL) and the results.jsonl it feeds
    auth.py        the tokens file and the per-token rate limit
    dispatcher.py  lanes (one per GPU) that claim batches from the queue and run them through the engine
    service.py     the service without HTTP: admission, idempotency, results, rewards, feedback
    app.py         the FastAPI routes over service.py
    client.py      a small HTTP client (used by examples/rl_client.py and tools/serve_loadtest.py)

Candidate code never runs in the service's process: the engine runs every
candidate in a fresh sandboxed worker subprocess, as ``kernelgate run`` does.
Nothing here imports torch, FastAPI or httpx at import time.
"""
