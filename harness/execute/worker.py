"""The candidate worker: the only process that imports candidate code.

Started by :mod:`harness.execute.runner` as a fresh interpreter
(``python -m harness.execute.worker --in-fd R --out-fd W``) in the candidate's
scratch folder, with stdin closed and stdout/stderr going to capped files.

Protocol (every message after the first is HMAC-signed, see channel.py)::

    parent -> worker   job spec (first line, carries the key)
    worker -> parent   {"event": "ready"}                 guards + timer captured
    worker -> parent   {"event": "imported"} | {"event": "fatal", ...}
    for each workload:
      worker -> parent {"event": "want_device", "workload": w}
      parent -> worker {"cmd": "go", "seed": s0}         device is ours alone
      for each round:
        worker -> parent {"event": "round", ...facts, "output_ipc": [descriptors] | "output_path": p}
        parent -> worker {"cmd": "next", "seed": s1} | {"cmd": "last"} | {"cmd": "stop"}
      parent -> worker {"cmd": "time"} | {"cmd": "skip"}
      worker -> parent {"event": "timing", ...raw samples} | {"event": "workload_done"}
    worker -> parent   {"event": "done"}

The worker reports *facts* (exceptions, launch counts, aten ops, mutated
inputs, new threads); the parent decides statuses. Reference outputs never
enter this process: outputs are handed to the trusted checker (CUDA IPC
handles, or a file: harness.execute.handoff). Round seeds
arrive one at a time, when the round starts: candidate code that reads the
worker's memory cannot learn the inputs of later rounds (and precompute or
cache their answers); the run's base seed never leaves the parent.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

MAX_TEXT = 4000


def _error(exc: BaseException) -> dict:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"type": type(exc).__name__, "message": str(exc)[:MAX_TEXT], "traceback_tail": tb[-MAX_TEXT:]}


def _is_cuda_error(exc: BaseException) -> bool:
    """A device fault (illegal address, launch failure) poisons the CUDA context for good."""
    text = f"{type(exc).__name__}: {exc}"
    return "CUDA error" in text or "AcceleratorError" in text or "illegal memory access" in text


def _set_rlimits(spec: dict) -> None:
    """Limits that are safe with CUDA (no address-space cap: the driver maps huge ranges)."""
    import resource

    limits = {
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: int(spec.get("max_file_bytes", 8 << 30)),
        resource.RLIMIT_NOFILE: int(spec.get("max_open_files", 4096)),
    }
    if spec.get("cpu_seconds"):
        limits[resource.RLIMIT_CPU] = int(spec["cpu_seconds"])
    for res, value in limits.items():
        soft, hard = resource.getrlimit(res)
        new_hard = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(res, (min(value, new_hard), new_hard))
        except (ValueError, OSError):
            pass


def _children() -> set[int]:
    """Pids of this process's live children (read from /proc; no dependency)."""
    me, out = str(os.getpid()), set()
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                    if fields[1].decode() == me and fields[0] != b"Z":
                        out.add(int(entry))
                except (OSError, IndexError):
                    continue
    except OSError:
        pass
    return out


def _import_candidate(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    return module


def _poison(device: str, nbytes: int) -> None:
    """Fill the caching allocator's free blocks with NaN so unwritten outputs read as NaN."""
    import torch

    if not device.startswith("cuda") or nbytes <= 0:
        return
    t = torch.empty(nbytes // 2 + 1024, dtype=torch.float16, device=device)
    t.fill_(float("nan"))
    del t


def run(spec: dict, chan: Any) -> None:
    import torch

    from harness.execute import guards
    from harness.execute.handoff import export_outputs
    from harness.execute.inputs import copy_matching_state, flatten_outputs, make_inputs, make_reference_model
    from harness.measure.timing import DeviceTimer, TimingConfig, time_alternating
    from harness.problems.loader import load_module

    device = spec["device"]
    _warm_up(spec)  # done already in a pre-started worker (idempotent)
    if device.startswith("cuda"):
        frac = float(spec.get("gpu_memory_fraction") or 0)
        if 0 < frac < 1:
            # the caching allocator refuses to grow past this share of the GPU: one
            # candidate cannot starve the others (or the checker) sharing the device
            torch.cuda.set_per_process_memory_fraction(frac, 0)
    if spec.get("dsl") == "tilelang":  # importing tilelang costs seconds: only when the candidate uses it
        guards.install_tilelang_hooks(execute=device.startswith("cuda"))
    tcfg = TimingConfig(**spec["timing"])
    timer = DeviceTimer(device, tcfg.flush_bytes)
    chan.send({"event": "ready", "sandbox": spec.get("sandbox_description", "none")})

    try:
        cand = _import_candidate(Path(spec["candidate_path"]))
        if not hasattr(cand, "ModelNew"):
            chan.send({"event": "fatal", "status": "INVALID_CANDIDATE",
                       "error": {"type": "MissingModelNew", "message": "the file defines no 'ModelNew' class "
                                 "(KernelBench convention: class ModelNew(nn.Module) with Model's constructor and forward)",
                                 "traceback_tail": ""}})
            return
        if not (isinstance(cand.ModelNew, type) and issubclass(cand.ModelNew, torch.nn.Module)):
            chan.send({"event": "fatal", "status": "INVALID_CANDIDATE",
                       "error": {"type": "BadModelNew", "message": "ModelNew must be a subclass of torch.nn.Module",
                                 "traceback_tail": ""}})
            return
    except SystemExit as exc:
        chan.send({"event": "fatal", "status": "COMPILE_ERROR", "error": _error(exc)})
        return
    except BaseException as exc:  # noqa: BLE001 - any import failure is the candidate's
        chan.send({"event": "fatal", "status": "COMPILE_ERROR", "error": _error(exc)})
        return
    chan.send({"event": "imported"})

    handoff = Path(spec["handoff_dir"])
    for w in spec["workloads"]:
        name, dtype = w["name"], w["dtype"]
        torch.backends.cuda.matmul.allow_tf32 = bool(w["allow_tf32"])
        torch.backends.cudnn.allow_tf32 = bool(w["allow_tf32"])
        torch.set_float32_matmul_precision("high" if w["allow_tf32"] else "highest")
        module = load_module(Path(spec["problem_path"]), w["params"])
        try:
            ref_model = make_reference_model(module, dtype, device, w["model_seed"])
            torch.manual_seed(w["model_seed"])
            with torch.device(device):
                new_model = cand.ModelNew(*module.get_init_inputs())
            new_model = new_model.to(device=device, dtype=getattr(torch, dtype)).eval()
            copy_matching_state(ref_model, new_model)
        except TypeError as exc:
            chan.send({"event": "workload_fatal", "workload": name, "status": "INVALID_CANDIDATE", "error": _error(exc)})
            continue
        except BaseException as exc:  # noqa: BLE001
            chan.send({"event": "workload_fatal", "workload": name, "status": "RUNTIME_ERROR", "error": _error(exc)})
            continue

        if spec.get("precompile") and device.startswith("cuda"):
            # Compile (Triton JIT and every autotune config, TileLang nvcc)
            # before asking for the device, so compiles overlap with other
            # candidates' timing. Triton launches are dry here (compile, no
            # launch, no autotune benchmarking: guards.dry_launches), so this
            # forward puts almost no work on the GPU; a TileLang kernel does
            # run once (its call returns the outputs the forward goes on with).
            # Errors here are ignored: the correctness rounds report them.
            try:
                warm = make_inputs(module, dtype, device, w["warm_seed"], 0, spec["input_transform"])
                with torch.no_grad(), guards.dry_launches():
                    new_model(*warm)
                torch.cuda.synchronize()
                del warm
            except Exception as exc:  # noqa: BLE001
                if _is_cuda_error(exc):  # the context is now unusable: report and stop
                    chan.send({"event": "workload_fatal", "workload": name, "status": "RUNTIME_ERROR",
                               "error": _error(exc)})
                    return
        # an autotuner benchmarks in the first real forward: ask for the GPU alone for that round
        chan.send({"event": "want_device", "workload": name,
                   "exclusive_first_round": bool(spec.get("precompile")) and guards.dry_saw_autotune()})
        cmd = chan.recv()
        if not cmd or cmd.get("cmd") != "go":
            return
        seed = int(cmd["seed"])

        timing_sets: list[list] = []
        stopped = False
        for r in range(w["rounds"]):
            try:
                inputs = make_inputs(module, dtype, device, seed, r, spec["input_transform"])
            except BaseException as exc:  # noqa: BLE001 - e.g. a CUDA error left behind by the candidate
                chan.send({"event": "round", "workload": name, "round": r, "error": _error(exc),
                           "error_is_cuda": _is_cuda_error(exc)})
                return
            if r < tcfg.input_sets:
                timing_sets.append([x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            snapshot = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            in_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
            facts: dict[str, Any] = {"event": "round", "workload": name, "round": r}
            _poison(device, 2 * in_bytes)
            threads_before = guards.live_threads()
            children_before = _children()
            guards.COUNTER.reset()
            try:
                recorder = guards.AtenRecorder()
                t_fwd = time.perf_counter()
                with torch.no_grad(), recorder:
                    out = new_model(*inputs)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                facts["forward_s"] = round(time.perf_counter() - t_fwd, 4)  # diagnostics only: never scored
                facts["aten_forbidden"] = recorder.forbidden(tuple(spec["library_aten"]))
            except guards.LoweredOnly:
                facts["lowered_sources"] = [s[:200_000] for s in guards.COUNTER.lowered_sources]
                chan.send(facts)
                stopped = True
                break
            except BaseException as exc:  # noqa: BLE001
                facts["error"] = _error(exc)
                facts["error_is_cuda"] = _is_cuda_error(exc)
                chan.send(facts)
                if facts["error_is_cuda"]:
                    return  # the context may be poisoned; the parent probes the GPU
                stopped = True
                break
            facts["launches"] = guards.COUNTER.total
            facts["new_threads"] = len(guards.live_threads() - threads_before)
            facts["new_children"] = len(_children() - children_before)
            if not spec["in_place"]:
                facts["mutated_inputs"] = [
                    i for i, (a, b) in enumerate(zip(inputs, snapshot))
                    if isinstance(a, torch.Tensor) and not torch.equal(a, b)
                ]
            outs = flatten_outputs(out)
            facts["output_types"] = [type(o).__module__ + "." + type(o).__qualname__ for o in outs]
            exported = None
            if all(type(o) is torch.Tensor for o in outs):
                t_save = time.perf_counter()
                if spec.get("handoff") == "ipc" and device.startswith("cuda"):
                    exported = export_outputs(outs)  # (descriptors, tensors kept alive until the reply)
                if exported is not None:
                    facts["output_ipc"] = exported[0]
                else:
                    path = handoff / f"{name}.r{r}.pt"
                    torch.save([o.detach().to("cpu") for o in outs], path)
                    facts["output_path"] = str(path)
                facts["handoff_s"] = round(time.perf_counter() - t_save, 4)
            chan.send(facts)
            reply = chan.recv()
            if not reply or reply.get("cmd") not in ("next", "last"):
                stopped = True
                break
            seed = int(reply.get("seed", -1))
            del out, outs, exported
        if stopped:
            chan.send({"event": "workload_done", "workload": name})
            continue
        reply = chan.recv()
        if not reply or reply.get("cmd") != "time":
            chan.send({"event": "workload_done", "workload": name})
            continue
        try:
            notes: list[str] = []
            samples = time_alternating(timer, {"library": (ref_model, timing_sets), "candidate": (new_model, timing_sets)},
                                       tcfg, notes)
            chan.send({"event": "timing", "workload": name, "samples_ms": samples, "timer": timer.name, "notes": notes})
        except BaseException as exc:  # noqa: BLE001
            chan.send({"event": "timing_error", "workload": name, "error": _error(exc)})
        del ref_model, new_model, timing_sets
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    chan.send({"event": "done"})


def _lock_down(pre: dict) -> str:
    """Resource limits and the Landlock sandbox, before torch (or anything that starts threads) is imported."""
    _set_rlimits(pre)
    if not pre.get("sandbox", True):
        return "none: disabled (--no-sandbox)"
    from harness.execute.sandbox import apply, default_policy

    root = Path(__file__).resolve().parents[2]
    problems = [Path(p) for p in pre["problem_paths"]]
    return apply(default_policy(Path.cwd(), root, problems[0], more_problems=tuple(problems[1:])))


def _warm_up(pre: dict) -> None:
    """What every candidate needs and no candidate decides: torch, Triton's launch counter, the CUDA context."""
    import torch

    from harness.execute import guards

    guards.install_triton_counter()
    with torch.no_grad(), guards.AtenRecorder():  # the first dispatch-mode use builds ~1.5 s of Python machinery
        torch.ones(2) + 1
    if str(pre.get("device", "cpu")).startswith("cuda"):
        torch.cuda.set_device(0)  # CUDA_VISIBLE_DEVICES pins the worker to its GPU
        torch.empty(1, device="cuda")  # create the context now (an allocation, no kernel), not on the candidate's clock
        try:  # Triton's driver helpers are a C module compiled into this worker's fresh cache: build it now
            from triton.runtime import driver

            driver.active.utils  # noqa: B018 - the attribute access is the work
        except Exception:  # noqa: BLE001 - no Triton, or a broken one: the candidate's import will say so
            pass
        if pre.get("tilelang"):  # importing TileLang costs seconds
            guards.install_tilelang_hooks(execute=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.execute.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--prestart", metavar="JSON", help="pre-started worker: lock down and warm up with these "
                        "settings (device, sandbox, max_file_bytes, problem_paths), then wait for the spec")
    args = parser.parse_args(argv)

    from harness.execute.channel import Endpoint

    pre = json.loads(args.prestart) if args.prestart else None
    sandbox = ""
    if pre is not None:
        sandbox = _lock_down(pre)
        _warm_up(pre)
    reader = os.fdopen(args.in_fd, "rb", buffering=0)
    line = b""
    while not line.endswith(b"\n"):
        chunk = reader.read(1)
        if not chunk:
            return 3  # the parent went away (or closed the pool) before giving us a candidate
        line += chunk
    spec = json.loads(line)
    chan = Endpoint(reader, args.out_fd, bytes.fromhex(spec.pop("key")))  # the parent's commands follow the spec
    if pre is None:
        sandbox = _lock_down({**spec, "problem_paths": [spec["problem_path"]]})
    elif spec["problem_path"] not in pre["problem_paths"] or bool(spec.get("sandbox", True)) != bool(pre.get("sandbox", True)):
        chan.send({"event": "fatal", "status": "HARNESS_ERROR", "error": {
            "type": "PrestartMismatch", "message": "pre-started worker was set up for other problems or sandbox "
            "settings than its candidate's spec", "traceback_tail": ""}})
        return 4
    spec["sandbox_description"] = sandbox
    run(spec, chan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
