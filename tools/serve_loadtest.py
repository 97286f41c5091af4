"""Load test of `kernelgate serve`, and the CLI on the same candidates for comparison.

What it does::

    1. N candidates: the bundled kernels (submissions/triton-reference, tilelang-reference, defects, taken
       round-robin) each with a trailing comment "# loadtest variant K NONCE", so every one hashes differently
    2. a service on this machine (unless --url): kernelgate serve --results OUT/service --tokens ...
    3. C client processes; client i submits candidates i, i+C, ... in batches of --batch, then long-polls
       ("until": "any") and notes when each result is first seen (--lockstep: each batch's results before the
       next batch is submitted, as an RL loop's steps)
    4. checks: every candidate got its own task, every task is done with one record per workload, and
       OUT/service/results.jsonl holds each (task, workload) exactly once (nothing lost, nothing twice)
    5. the CLI: the same N files in one folder, `kernelgate run` with the same preset, GPUs and jobs
    6. OUT/loadtest.json and a summary: evaluations per hour (records / (last result - first submission)),
       p50 / p99 latency from submission to result as the client saw it; the CLI's evaluations per hour over its
       whole wall clock and from its start to its last record (the service's span leaves out its own start-up,
       which a running service has already paid; the CLI's start-to-last-record leaves out only its exit)

An evaluation is one (candidate, workload) record, as in docs/throughput.md.

On the H200 (the run the issue asks for: one device command per side, as tools/device/serve_run.sh does, each
inside the device's 10 minutes; --tags/--workloads narrow the workloads)::

    python tools/serve_loadtest.py --n 500 --clients 8 --device cuda --gpus 0 --tags smoke --no-cli --nonce N ...
    python tools/serve_loadtest.py --n 500 --clients 8 --device cuda --gpus 0 --tags smoke --no-service --nonce N ...

On the CPU at a tiny scale (Triton interpreter, smoke workloads; TileLang lowers only)::

    python tools/serve_loadtest.py --n 12 --clients 3 --device cpu --out runs/loadtest-cpu
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import secrets
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FOLDERS = ("triton-reference", "tilelang-reference", "defects")


def candidates(n: int, nonce: str, folders=FOLDERS) -> list[tuple[str, str, str]]:
    """(problem id, file stem, source) for N variants of the bundled kernels, round-robin over the folders."""
    per = [sorted((ROOT / "submissions" / f).glob("*.py")) for f in folders]
    order = [x[i] for i in range(max(len(x) for x in per)) for x in per if i < len(x)]
    out = []
    for k in range(n):
        path = order[k % len(order)]
        src = path.read_text() + f"\n# loadtest variant {k} {nonce}\n"
        out.append((path.stem.split("__")[0], f"{path.stem.split('__')[0]}__{path.parent.name}_v{k}", src))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _client(i: int, url: str, token: str, items: list[tuple[int, str, str]], batch: int, preset: str,
            selection: dict, out, seen_path: str | None = None, lockstep: bool = False) -> None:
    """Submit ``items`` in batches, long-poll until every task is done, put the tasks seen on ``out``; each task
    is also appended to ``seen_path`` as it is seen (what the parent reads if it has to stop this client).
    ``lockstep``: each batch's results are awaited before the next is submitted (an RL loop's steps)."""
    from harness.serve.client import ServiceClient

    log = open(seen_path, "a", encoding="utf-8") if seen_path else None
    try:
        with ServiceClient(url, token, submit_timeout_s=3600) as kg:
            submitted: dict[str, tuple[int, float]] = {}
            seen: dict[str, dict] = {}

            def wait_for(pending: list[str]) -> None:
                while pending:
                    for v in kg.query(pending, wait_s=30, until="any", include=("records",)):
                        if v["state"] == "done" and v["task_id"] not in seen:
                            seen[v["task_id"]] = {"task_id": v["task_id"], "k": submitted[v["task_id"]][0],
                                                  "submitted": submitted[v["task_id"]][1], "seen_done": time.time(),
                                                  "server_latency_s": v["latency_s"], "statuses": v["statuses"],
                                                  "records": len(v["records"]), "workloads": v["workloads"]}
                            if log is not None:
                                log.write(json.dumps(seen[v["task_id"]]) + "\n")
                                log.flush()
                    pending = [t for t in pending if t not in seen]

            for start in range(0, len(items), batch):
                chunk = items[start:start + batch]
                t = time.time()
                ids = kg.submit_batch([{"source": src, "problem": pid} for _, pid, src in chunk], preset=preset,
                                      generator="loadtest", generator_version=f"client-{i}", **selection)
                for (k, _, _), tid in zip(chunk, ids):
                    submitted[tid] = (k, t)
                if lockstep:
                    wait_for(list(ids))
            wait_for(list(submitted))
            out.put({"client": i, "tasks": list(seen.values()), "throttled": kg.throttled, "error": None})
    except Exception as exc:  # noqa: BLE001 - reported by the parent, which fails the run
        out.put({"client": i, "tasks": [], "throttled": 0, "error": f"{type(exc).__name__}: {exc}"})
    finally:
        if log is not None:
            log.close()


def _collect(procs: list, q, out: Path, deadline: float | None) -> tuple[list[dict], bool]:
    """Each client's report; at ``deadline`` (monotonic) the clients still running are stopped and their tasks
    read from their seen files. Returns (reports, complete)."""
    import queue as queue_mod

    got: dict[int, dict] = {}
    while len(got) < len(procs):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        try:
            g = q.get(timeout=left)
        except queue_mod.Empty:
            break
        got[g["client"]] = g
    complete = len(got) == len(procs)
    for i, p in enumerate(procs):
        if i not in got:
            p.terminate()
            path = out / f"seen-{i}.jsonl"
            tasks = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
            got[i] = {"client": i, "tasks": tasks, "throttled": 0,
                      "error": "stopped at --deadline-s before all its tasks were done"}
        p.join(timeout=30)
    return [got[i] for i in range(len(procs))], complete


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def run_service_side(args, cands, out: Path) -> tuple[subprocess.Popen | None, dict]:
    """The service's side: (the service process this started, still running, or None; the report). Everything
    is checked while the service still runs, so the caller can write the report before stopping it."""
    from harness.serve.auth import add_client

    results = out / "service"
    tokens = out / "tokens.json"
    if args.url:
        url, token, proc = args.url, args.token, None
    else:
        token = add_client(tokens, f"loadtest-{secrets.token_hex(3)}", rate_per_s=1e6, burst=max(1, args.n))
        port = _free_port()
        argv = [sys.executable, "-m", "harness.commands.serve", "--results", str(results), "--tokens", str(tokens),
                "--device", args.device, "--port", str(port), "--yes-execute", "--log-level", "warning",
                "--batch-max", str(args.batch_max)]
        if args.gpus:
            argv += ["--gpus", args.gpus]
        if args.jobs:
            argv += ["--jobs", str(args.jobs)]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        log = open(out / "service.log", "ab")
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
    try:
        return proc, _measure(args, cands, out, url, token, proc)
    except BaseException:  # a failed load test (a client that cannot start, ^C) never leaves its service running
        stop_service(proc)
        raise


def stop_service(proc: subprocess.Popen | None) -> None:
    """Stop the service this script started (None: it used one running elsewhere)."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _measure(args, cands, out: Path, url: str, token: str, proc: subprocess.Popen | None) -> dict:
    """Wait for the service, run the clients, check what they and results.jsonl saw; the report."""
    results = out / "service"
    if proc is not None:
        import httpx

        deadline = time.monotonic() + 900
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the service exited with {proc.returncode}; see {out / 'service.log'}")
            try:
                if httpx.get(url + "/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the service did not start in 900 s; see {out / 'service.log'}")
            time.sleep(0.5)
    selection = {"workloads": args.workloads.split(",")} if args.workloads else {}
    if args.tags:
        selection["tags"] = args.tags.split(",")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    items = [(k, pid, src) for k, (pid, _, src) in enumerate(cands)]
    procs = [ctx.Process(target=_client, args=(i, url, token, items[i::args.clients], args.batch, args.preset,
                                               selection, q, str(out / f"seen-{i}.jsonl"), args.lockstep))
             for i in range(args.clients)]
    deadline = time.monotonic() + args.deadline_s if args.deadline_s else None
    for p in procs:
        p.start()
    got, complete = _collect(procs, q, out, deadline)
    health = None
    if proc is not None:
        import httpx

        try:
            health = httpx.get(url + "/v1/health", timeout=10).json()
        except httpx.HTTPError:
            pass
    errors = [g["error"] for g in got if g["error"]]
    tasks = [t for g in got for t in g["tasks"]]
    checks = {"client_errors": errors, "candidates": len(cands), "tasks_done": len(tasks),
              "distinct_task_ids": len({t["task_id"] for t in tasks}),
              "tasks_missing_records": sum(1 for t in tasks if t["records"] != len(t["workloads"]))}
    if not args.url:
        lines = [json.loads(x) for x in (results / "results.jsonl").read_text().splitlines() if x.strip()]
        keys = [(ln["candidate"].rsplit("__", 1)[1][:-3], ln["workload"]) for ln in lines]
        want = {(t["task_id"], w) for t in tasks for w in t["workloads"]}
        checks.update({"jsonl_records": len(lines), "jsonl_duplicates": len(keys) - len(set(keys)),
                       "jsonl_missing": len(want - set(keys))})
    checks["ok"] = (not errors and checks["tasks_done"] == checks["distinct_task_ids"] == len(cands)
                    and checks["tasks_missing_records"] == 0 and checks.get("jsonl_duplicates", 0) == 0
                    and checks.get("jsonl_missing", 0) == 0)
    lat = [t["seen_done"] - t["submitted"] for t in tasks]
    records = sum(t["records"] for t in tasks)
    span = (max(t["seen_done"] for t in tasks) - min(t["submitted"] for t in tasks)) if tasks else 0.0
    statuses: dict[str, int] = {}
    for t in tasks:
        for s in t["statuses"].values():
            statuses[s] = statuses.get(s, 0) + 1
    return {"url": url, "complete": complete, "records": records, "span_s": round(span, 2),
            "evaluations_per_hour": round(records / span * 3600, 1) if span else None,
            "candidates_per_hour": round(len(tasks) / span * 3600, 1) if span else None,
            "latency_s": {"p50": _pct(lat, 0.5), "p99": _pct(lat, 0.99), "max": max(lat) if lat else None,
                          "mean": statistics.fmean(lat) if lat else None},
            "server_latency_s": {"p50": _pct([t["server_latency_s"] for t in tasks], 0.5),
                                 "p99": _pct([t["server_latency_s"] for t in tasks], 0.99)},
            "throttled": sum(g["throttled"] for g in got), "statuses": statuses, "checks": checks,
            "lanes": health["lanes"] if health else None}


def run_cli_side(args, cands, out: Path) -> dict:
    folder = out / "cli" / "loadtest"
    folder.mkdir(parents=True, exist_ok=True)
    for _, stem, src in cands:
        (folder / f"{stem}.py").write_text(src)
    argv = [sys.executable, "-m", "harness", "run", str(folder), "--out", str(out / "cli-results"), "--device",
            args.device, "--yes-execute", "--no-progress"]
    if args.preset == "quick":
        argv.append("--quick")
    elif args.preset == "thorough":
        argv += ["--rounds", "10"]  # the CLI has no flag for thorough's longer timing: rounds match, samples do not
    if args.gpus:
        argv += ["--gpus", args.gpus]
    gpus = len(args.gpus.split(",")) if args.gpus else 1
    jobs = (args.jobs or 12) * gpus if args.device == "cuda" else (args.jobs or os.cpu_count() or 1)  # the service's
    argv += ["--jobs", str(jobs)]
    if args.workloads:
        argv += ["--workloads", args.workloads]
    elif args.tags:
        argv += ["--tags", args.tags]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0, t0_wall = time.monotonic(), time.time()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (out / "cli.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        return {"error": f"kernelgate run exited {proc.returncode}; see {out / 'cli.log'}", "wall_s": round(wall, 2)}
    lines = [json.loads(x) for x in (out / "cli-results" / "results.jsonl").read_text().splitlines() if x.strip()]
    from datetime import datetime

    stamps = sorted(datetime.fromisoformat(ln["created_at"]).timestamp() for ln in lines)
    to_last = stamps[-1] - t0_wall if stamps else None  # created_at has whole seconds
    return {"records": len(lines), "wall_s": round(wall, 2), "jobs": jobs,
            "evaluations_per_hour": round(len(lines) / wall * 3600, 1),
            "start_to_last_record_s": round(to_last, 1) if to_last else None,
            "evaluations_per_hour_to_last_record": round(len(lines) / to_last * 3600, 1) if to_last else None,
            "first_to_last_record_s": stamps[-1] - stamps[0] if stamps else None}


def main(argv: list[str] | None = None) -> int:
    from harness.serve.dispatcher import BATCH_MAX

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500, help="candidates (default 500)")
    ap.add_argument("--clients", type=int, default=8, help="client processes (default 8)")
    ap.add_argument("--batch", type=int, default=25, help="candidates per submission request (default 25)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--gpus", help="GPU indices for the service and the CLI, e.g. 0,1")
    ap.add_argument("--jobs", type=int, help="jobs per GPU for both (default: the service's default, 12 per GPU)")
    ap.add_argument("--lockstep", action="store_true",
                    help="each client awaits a batch's results before submitting its next, as an RL loop's steps do "
                         "(latency is then a step's; default: every batch submitted at once, a burst)")
    ap.add_argument("--batch-max", type=int, default=BATCH_MAX,
                    help=f"the service's --batch-max (default {BATCH_MAX}, the service's own)")
    ap.add_argument("--preset", default="quick", choices=("quick", "standard", "thorough"))
    ap.add_argument("--workloads", help="workload names for both sides (default: the device's default tags)")
    ap.add_argument("--tags", help="workload tags for both sides")
    ap.add_argument("--url", help="use this running service instead of starting one (then --token)")
    ap.add_argument("--token")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI comparison")
    ap.add_argument("--no-service", action="store_true",
                    help="skip the service: the CLI side alone (a second device command, with the first's --nonce)")
    ap.add_argument("--nonce", help="the variants' nonce (default: a fresh one); the same --n and --nonce give the "
                                    "same candidates, byte for byte")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="stop the clients this many seconds after they start and report what they saw by then "
                         "(\"complete\": false; for a device command's time limit)")
    ap.add_argument("--out", default="runs/loadtest")
    args = ap.parse_args(argv)
    if args.url and not args.token:
        raise SystemExit("serve_loadtest: --url needs --token")
    if args.no_cli and args.no_service:
        raise SystemExit("serve_loadtest: --no-cli and --no-service leave nothing to run")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    nonce = args.nonce or secrets.token_hex(4)
    cands = candidates(args.n, nonce)
    print(f"{len(cands)} candidates ({len({c[0] for c in cands})} problems), {args.clients} client processes, "
          f"preset {args.preset}, device {args.device}", file=sys.stderr)
    report = {"n": args.n, "clients": args.clients, "batch": args.batch, "lockstep": args.lockstep,
              "device": args.device, "gpus": args.gpus,
              "preset": args.preset, "nonce": nonce, "service": None, "cli": None}
    service = None
    if not args.no_service:
        proc, service = run_service_side(args, cands, out)
        report["service"] = service
        (out / "loadtest.json").write_text(json.dumps(report, indent=2) + "\n")  # kept if stopping the service is cut
        stop_service(proc)
    cli = None if args.no_cli else run_cli_side(args, cands, out)
    report["cli"] = cli
    (out / "loadtest.json").write_text(json.dumps(report, indent=2) + "\n")
    s, c = service, cli or {}
    if s is not None:
        print(f"service: {s['records']} evaluations of {len(cands)} candidates in {s['span_s']} s -> "
              f"{s['evaluations_per_hour']} evaluations/h; latency submission->result p50 {s['latency_s']['p50']:.1f} "
              f"s, p99 {s['latency_s']['p99']:.1f} s; throttled {s['throttled']}x; statuses {s['statuses']}")
        print(f"checks: {'OK' if s['checks']['ok'] else 'FAILED'} {s['checks']}")
    if cli:
        print(f"cli:     {c.get('records')} evaluations in {c.get('wall_s')} s wall -> {c.get('evaluations_per_hour')} "
              f"evaluations/h ({c.get('evaluations_per_hour_to_last_record')}/h from start to last record; first->last "
              f"record {c.get('first_to_last_record_s')} s) {c.get('error') or ''}")
    print(f"report: {out / 'loadtest.json'}")
    return 0 if (s is None or s["checks"]["ok"]) and not (cli or {}).get("error") else 1


if __name__ == "__main__":
    sys.exit(main())
