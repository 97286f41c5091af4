"""``kernelgate serve --results DIR``: an HTTP evaluation service for many clients (FastAPI on uvicorn)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path

from harness.commands._common import add_problem_args, load_registry_from_args

DEFAULT_PORT = 8321

EPILOG = """\
what it does:
  clients POST candidates (source text + problem id) and get task ids at once; one lane per GPU claims
  batches from a durable queue (RESULTS/serve/queue.sqlite) and runs them exactly like 'kernelgate run':
  static scans here (parsing only), every candidate in a fresh sandboxed worker subprocess, a trusted
  float64 checker, timing and screening. Each record is stored, appended to RESULTS/results.jsonl, and
  returned to clients that poll or long-poll, with a reward (harness/score/reward.py) and feedback text.
  Identical submissions (same source, problem, workloads, preset, environment, harness version) return the
  stored task unless "rerun": true. A full queue or an exhausted client answers 429 with Retry-After.
  Killed or restarted, the service re-queues what was running (once per restart) and loses nothing queued.

examples:
  # make a token for each client (printed once; the file keeps only its sha256)
  kernelgate serve --add-client rl-trainer --tokens tokens.json --rate 50 --burst 2000
  # serve every local GPU to the network
  kernelgate serve --results runs/service --tokens tokens.json --host 0.0.0.0 --gpus 0,1,2,3 --yes-execute
  # try it on this machine without tokens (loopback only) on the CPU path
  kernelgate serve --results runs/svc --no-auth --device cpu --yes-execute
  # a Ray cluster behind the same API ('ray start' first, see README 'Many machines (Ray)')
  kernelgate serve --results runs/service --tokens tokens.json --executor ray --ray-address auto --ray-lanes 4
  # submit one candidate, then long-poll its result with reward and feedback
  curl -s -H "Authorization: Bearer $KG_TOKEN" --data-binary @<(jq -n --rawfile s gelu.py \\
       '{source: $s, problem: "gelu", preset: "quick"}') http://HOST:8321/v1/tasks
  curl -s -H "Authorization: Bearer $KG_TOKEN" "http://HOST:8321/v1/tasks/TASK_ID?wait_s=30&include=reward,feedback"
  # the usual reports on everything the service evaluated
  kernelgate leaderboard --results runs/service
  python examples/rl_client.py --url http://HOST:8321 --token $KG_TOKEN --problem gelu --source gelu.py

docs/service.md has every endpoint, field, limit and the restart semantics.
"""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    from harness.serve.auth import TokensFileError, TokenTable, add_client

    if args.add_client:
        if not args.tokens:
            raise SystemExit("kernelgate: error: --add-client NAME needs --tokens FILE (created if absent)")
        try:
            token = add_client(args.tokens, args.add_client, args.rate, args.burst)
        except TokensFileError as exc:
            raise SystemExit(f"kernelgate: error: {exc}")
        print(f"client '{args.add_client}' added to {args.tokens} ({args.rate:g} candidates/s, burst {args.burst}); "
              f"its token (shown once):\n{token}")
        return 0
    if not args.results:
        raise SystemExit("kernelgate: error: --results DIR is required (the service's results folder)")
    if args.no_auth == bool(args.tokens):
        raise SystemExit("kernelgate: error: give --tokens FILE (one token per client) or --no-auth (loopback only)")
    if args.no_auth and not _is_loopback(args.host):
        raise SystemExit(f"kernelgate: error: --no-auth serves loopback only; --host {args.host} would let anyone on "
                         "the network run code on this machine: use --tokens FILE")
    import importlib.util

    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"kernelgate: error: kernelgate serve needs {', '.join(missing)}: pip install 'kernelgate[serve]'")
    if args.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise SystemExit("kernelgate: error: --executor ray needs the 'ray' package: pip install 'kernelgate[ray]'")
    for name in ("max_queue", "max_batch", "max_source_bytes", "max_body_bytes", "batch_max", "max_attempts",
                 "ray_lanes", "check_slots"):
        if getattr(args, name) < 1:
            raise SystemExit(f"kernelgate: error: --{name.replace('_', '-')} must be at least 1")
    tokens = None
    if args.tokens:
        try:
            tokens = TokenTable.from_file(args.tokens)
        except TokensFileError as exc:
            raise SystemExit(f"kernelgate: error: --tokens: {exc}")
        if not tokens.clients:
            raise SystemExit(f"kernelgate: error: --tokens {args.tokens} has no clients; add one with --add-client NAME")
    if not args.yes_execute:
        print("note: the service executes untrusted candidate code (confined subprocesses: namespaces, seccomp, "
              "Landlock; see "
              "docs/security.md); --yes-execute silences this note", file=sys.stderr)

    from harness import env as envmod
    from harness.score.gates import Thresholds
    from harness.serve.app import run_server
    from harness.serve.submission import Limits
    from harness.serve.service import Service, ServiceConfig, build_engines

    device = args.device or envmod.default_device()
    gpus = tuple(int(g) for g in args.gpus.split(",")) if args.gpus else (0,)
    jobs = args.jobs or (max(1, min(12, (os.cpu_count() or 1) // len(gpus))) if device == "cuda" else (os.cpu_count() or 1))
    reg = load_registry_from_args(args)
    results = Path(args.results)
    thresholds = Thresholds(args.tau_lib, args.tau_roof_memory, args.tau_roof_compute)
    from harness.serve.presets import time_kernels

    if time_kernels(device, args.timing):
        print(f"ceilings: loading (or measuring) the calibration for {device} ...", file=sys.stderr)
    else:
        print("CPU path: correctness only, no timing (as kernelgate run; --timing times it anyway, on the host "
              "clock, never a verdict)", file=sys.stderr)
    try:
        engines = build_engines(device, results / "serve" / "scratch", gpus=gpus, jobs=jobs, executor=args.executor,
                                ray_address=args.ray_address, ray_lanes=args.ray_lanes, thresholds=thresholds,
                                problem_paths=[p.path for p in reg],
                                sandbox=not args.no_sandbox, isolation=args.isolation, check_slots=args.check_slots,
                                seed=args.seed,
                                compile_timeout_s=args.compile_timeout, round_timeout_s=args.round_timeout,
                                timing_timeout_s=args.timing_timeout, prestart=not args.no_prestart,
                                spawn=args.spawn, timing=args.timing)
    except RuntimeError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    config = ServiceConfig(
        results=results, device=device,
        limits=Limits(args.max_source_bytes, args.max_batch, args.allow_problem_source, args.max_body_bytes),
        max_queue=args.max_queue, batch_max=args.batch_max, linger_s=args.linger, max_attempts=args.max_attempts,
        max_wait_s=args.max_wait, drain_s=args.drain, auth=not args.no_auth, thresholds=thresholds, timing=args.timing)
    try:
        service = Service(config, engines, reg, tokens)
    except RuntimeError as exc:
        raise SystemExit(f"kernelgate: error: {exc}")
    lanes = ", ".join(engines)
    print(f"kernelgate serve: {len(reg)} problems, lanes {lanes} ({jobs} job(s) each), results -> "
          f"{results / 'results.jsonl'}; http://{args.host}:{args.port}/v1/health", file=sys.stderr)
    run_server(service, args.host, args.port, log_level=args.log_level, access_log=args.access_log)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from harness.execute.parent.options import DEFAULTS
    from harness.serve.auth import DEFAULT_BURST, DEFAULT_RATE_PER_S
    from harness.serve.dispatcher import BATCH_MAX
    from harness.serve.submission import Limits

    lim = Limits()
    p = sub.add_parser("serve", help="run the HTTP evaluation service (many clients, a queue, one lane per GPU)",
                       description=__doc__.splitlines()[0].split(": ", 1)[1], epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", metavar="DIR", help="the service's results folder: results.jsonl (every record) and "
                   "serve/queue.sqlite (the queue; reuse the folder to resume after a restart)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; 0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    auth = p.add_argument_group("clients")
    auth.add_argument("--tokens", metavar="FILE", help="tokens file: one token, rate and burst per client (JSON; "
                      "see docs/service.md)")
    auth.add_argument("--no-auth", action="store_true", help="no tokens (only with a loopback --host)")
    auth.add_argument("--add-client", metavar="NAME", help="add a client with a fresh token to --tokens FILE, print "
                      "the token and exit")
    auth.add_argument("--rate", type=float, default=DEFAULT_RATE_PER_S,
                      help=f"with --add-client: candidates per second (default {DEFAULT_RATE_PER_S:g})")
    auth.add_argument("--burst", type=int, default=DEFAULT_BURST,
                      help=f"with --add-client: most candidates at once (default {DEFAULT_BURST})")
    eng = p.add_argument_group("engine")
    eng.add_argument("--device", choices=("cuda", "cpu"), help="default: the GPU if present, else the CPU path")
    eng.add_argument("--gpus", help="comma-separated GPU indices, one lane each (default 0)")
    eng.add_argument("--jobs", type=int, help="candidates in flight per lane (default: 12 per GPU, the H200 runs' "
                     "pipelined setting in docs/throughput.md, at most the CPU cores per GPU; CPU path: the cores)")
    eng.add_argument("--executor", choices=("local", "ray"), default="local",
                     help="local (default): this machine's GPUs; ray: one Ray task per candidate on a Ray cluster")
    eng.add_argument("--ray-address", metavar="ADDR", help="with --executor ray: as kernelgate run --ray-address")
    eng.add_argument("--ray-lanes", type=int, default=2, help="with --executor ray: engine runs in flight at once "
                     "(default 2: one starts while the other finishes; Ray gives each candidate its own GPU)")
    eng.add_argument("--seed", type=int, help="base seed of every run (default: fresh and secret per run)")
    eng.add_argument("--check-slots", type=int, default=3, help="GPU: candidates checking correctness together (default 3)")
    eng.add_argument("--compile-timeout", type=float, default=DEFAULTS.compile_timeout_s,
                     help=f"seconds for import + build + first launch (default {DEFAULTS.compile_timeout_s:g})")
    eng.add_argument("--round-timeout", type=float, default=DEFAULTS.round_timeout_s,
                     help=f"seconds per correctness round (default {DEFAULTS.round_timeout_s:g})")
    eng.add_argument("--timing-timeout", type=float, default=DEFAULTS.timing_timeout_s,
                     help=f"seconds for one timed batch (default {DEFAULTS.timing_timeout_s:g})")
    eng.add_argument("--timing", dest="timing", action="store_true", default=None,
                     help="time kernels (default on a GPU; on the CPU path only with this flag: host-clock times, "
                          "never a verdict; the rule of kernelgate run and the Python API)")
    eng.add_argument("--no-timing", dest="timing", action="store_false", help="correctness only (the CPU path's default)")
    eng.add_argument("--no-prestart", action="store_true", help="no pre-started workers (see kernelgate run --help)")
    eng.add_argument("--spawn", choices=("fork", "exec"), default="fork",
                     help="how workers start: forked from a fork server (default) or exec (see kernelgate run --help)")
    eng.add_argument("--isolation", choices=("strict", "available", "off"), default="strict",
                     help="the workers' OS boundary (docs/security.md): 'strict' (default) refuses to start on a "
                          "machine that cannot give all of it; 'available' runs with what it allows (recorded)")
    eng.add_argument("--no-sandbox", action="store_true", help="same as --isolation off")
    eng.add_argument("--tau-lib", type=float, default=0.8, help="E_lib gate (default 0.8)")
    eng.add_argument("--tau-roof-memory", type=float, default=0.5, help="U_roof gate, memory-bound (default 0.5)")
    eng.add_argument("--tau-roof-compute", type=float, default=0.25, help="U_roof gate, compute-bound (default 0.25)")
    add_problem_args(p)
    lim_g = p.add_argument_group("limits")
    lim_g.add_argument("--max-queue", type=int, default=10_000, help="most queued tasks; more get 429 (default 10000)")
    lim_g.add_argument("--max-batch", type=int, default=lim.max_batch,
                       help=f"most candidates per request (default {lim.max_batch})")
    lim_g.add_argument("--max-body-bytes", type=int, default=lim.max_body_bytes,
                       help=f"largest request body in bytes (default {lim.max_body_bytes}, 64 MiB)")
    lim_g.add_argument("--max-source-bytes", type=int, default=lim.max_source_bytes,
                       help=f"largest candidate source in bytes (default {lim.max_source_bytes}; the largest bundled "
                            "candidate is 6.3 KB)")
    lim_g.add_argument("--allow-problem-source", action="store_true",
                       help="let clients send problem files (problem_source); they run unsandboxed in the trusted "
                            "checker, so allow it only for clients you trust like your own --problems files")
    lim_g.add_argument("--batch-max", type=int, default=BATCH_MAX,
                       help=f"most tasks per engine run of a lane (default {BATCH_MAX})")
    lim_g.add_argument("--linger", type=float, default=0.25, metavar="S",
                       help="seconds an idle lane waits for more arrivals before its first claim (default 0.25)")
    lim_g.add_argument("--max-attempts", type=int, default=3, help="times a task interrupted by restarts is run "
                       "before it is recorded as HARNESS_ERROR (default 3)")
    lim_g.add_argument("--max-wait", type=float, default=60.0, help="longest long-poll in seconds (default 60)")
    lim_g.add_argument("--drain", type=float, default=30.0, help="on SIGTERM, seconds running batches may finish "
                       "(default 30; what is still running then is re-queued at the next start)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.add_argument("--yes-execute", action="store_true", help="acknowledge that candidate code will be executed")
    p.set_defaults(func=cmd_serve)


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.commands.serve ...``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="kernelgate")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
