"""A fake engine for the service's queue, restart and HTTP tests, and a server that uses it.

:class:`FakeEngine` is :class:`harness.serve.engine.Engine` with ``run``
replaced: no worker, no checker; per selected workload it sleeps
``delay_s``, then emits a PASSED record (RUNTIME_ERROR for a source
containing ``FAIL_ME``; a source containing ``RAISE_IN_ENGINE`` makes the
whole run raise, as an engine bug would) with fixed timings (kernel 2 ms,
library 1 ms, floor 0.5 ms) built like the engine's own records; a source
containing ``CRASH_ME`` gets CRASHED, once per process (a failure a
neighbour could have caused: the next identical submission is PASSED). Every
call and every record it emits is appended (one JSON line, flushed and
fsynced) to ``calls_log``, so a test can see what ran before a SIGKILL.

``python tests/serve/serve_fakes.py --results DIR --port P [--tokens FILE]
[--delay S] [--calls FILE] [--max-queue N] [--batch-max N] [--allow-problem-source]``
serves a :class:`~harness.serve.service.Service` over it with uvicorn (the
same app and server as ``kernelgate serve``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.records import EnvSnapshot, ErrorInfo, Screening, Status, TimingStats, Verdict  # noqa: E402
from harness.serve.engine import Engine, EngineConfig  # noqa: E402

ENV = EnvSnapshot(device_kind="cpu", device_name="fake-cpu", device_uuid=None, driver=None, python="3.11", torch="2.13",
                  triton="3.9", tilelang=None, harness="0.1.0", sandbox="fake")


def _t(ms: float) -> TimingStats:
    return TimingStats(ms, 0.0, ms, ms, (ms,), "host_perf_counter", True)


class FakeEngine(Engine):
    def __init__(self, scratch: Path, delay_s: float = 0.0, calls_log: Path | None = None):
        super().__init__(EngineConfig(device="cpu", scratch_root=scratch), env=ENV, ceilings={})
        self.delay_s = delay_s
        self.calls_log = calls_log
        self.crashed: set[str] = set()

    def _log(self, entry: dict) -> None:
        if self.calls_log is None:
            return
        with open(self.calls_log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def run(self, items, preset, selection, on_record, on_drained=None) -> None:
        self._log({"event": "run", "pid": os.getpid(), "preset": preset.name,
                   "items": {it.key: [w.name for w in selection.resolve(it.problem, "cpu")] for it in items}})
        if any("RAISE_IN_ENGINE" in it.source for it in items):
            raise RuntimeError("RAISE_IN_ENGINE: the fake engine itself failed")
        for n, it in enumerate(items):
            if n == len(items) - 1 and on_drained is not None:
                on_drained()  # one item at a time: the last one starting is the run's drain
            for w in selection.resolve(it.problem, "cpu"):
                time.sleep(self.delay_s)
                if "FAIL_ME" in it.source:
                    err = ErrorInfo("RuntimeError", "FAIL_ME: the fake engine raised")
                    rec = self.failure_records(it, [w], err, run_id="fake")[0].replace(status=Status.RUNTIME_ERROR)
                elif "CRASH_ME" in it.source and it.source not in self.crashed:
                    self.crashed.add(it.source)
                    err = ErrorInfo("WorkerDied", "CRASH_ME: the worker was killed by signal 9")
                    rec = self.failure_records(it, [w], err, run_id="fake")[0].replace(status=Status.CRASHED)
                else:
                    scr = Screening(0.5, 0.25, 0.5, 0.5, "memory", "dram", Verdict.AUTHORING_DEFECT, False, 0.8, 0.5,
                                    "E_lib=0.5 (< 0.8); U_roof=0.25 (< 0.5, memory-bound)")
                    rec = self.failure_records(it, [w], ErrorInfo("Fake", "replaced below"), run_id="fake")[0].replace(
                        status=Status.PASSED, error=None, timing=_t(2.0), library_timing=_t(1.0), screening=scr)
                on_record(it.key, rec)
                self._log({"event": "record", "task": it.key, "workload": w.name})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tokens")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--calls")
    ap.add_argument("--max-queue", type=int, default=10_000)
    ap.add_argument("--batch-max", type=int, default=64)
    ap.add_argument("--max-source-bytes", type=int, default=256 * 1024)
    ap.add_argument("--allow-problem-source", action="store_true")
    args = ap.parse_args()
    from harness.problems.registry import load_registry
    from harness.serve.app import run_server
    from harness.serve.auth import TokenTable
    from harness.serve.submission import Limits
    from harness.serve.service import Service, ServiceConfig

    results = Path(args.results)
    engine = FakeEngine(results / "serve" / "scratch", args.delay, Path(args.calls) if args.calls else None)
    config = ServiceConfig(results=results, device="cpu", limits=Limits(args.max_source_bytes, 64, args.allow_problem_source),
                           max_queue=args.max_queue, batch_max=args.batch_max, linger_s=0.0, auth=bool(args.tokens),
                           drain_s=2.0)
    tokens = TokenTable.from_file(args.tokens) if args.tokens else None
    service = Service(config, {"cpu": engine}, load_registry(), tokens)
    run_server(service, "127.0.0.1", args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
