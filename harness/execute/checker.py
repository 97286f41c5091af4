"""The trusted reference checker: computes reference outputs and compares.

A long-lived subprocess of the runner (``python -m harness.execute.checker``)
speaking JSON lines on stdin/stdout. It imports problem code only (trusted),
never candidate code, so the reference outputs live in a process the
candidate cannot reach. It may use the GPU; the runner never does.

Request: ``{"op": "compare", "problem_path", "params", "dtype", "device",
"model_seed", "seed", "round", "input_transform", "atol", "rtol",
"reduction_length", "output_path"}``; reply: the dict from
:func:`harness.score.correctness.compare_outputs` plus ``ref_s`` (seconds
spent computing references; 0 on a cache hit) and ``check_s`` (loading the
candidate's output and comparing). References are cached, least recently
used first out, up to ``KERNELGATE_CHECKER_CACHE_MB`` (default 4096) per
process: every candidate of a run gets the same round seeds for a workload,
so the candidates of one problem share one reference computation (the runner
sends a workload's compares to the process that computed its references).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path

_CACHE: "OrderedDict[str, tuple[list, list]]" = OrderedDict()
_CACHE_MAX_ENTRIES = 64


def _cache_limit_bytes() -> int:
    try:
        return max(0, int(os.environ.get("KERNELGATE_CHECKER_CACHE_MB", "4096"))) << 20
    except ValueError:
        return 4096 << 20


def _nbytes(entry: tuple[list, list]) -> int:
    return sum(t.numel() * t.element_size() for part in entry for t in part)


def _reference(req: dict) -> tuple[list, list]:
    import torch

    from harness.execute.inputs import flatten_outputs, make_inputs, make_reference_model
    from harness.problems.loader import load_module

    key = json.dumps([req["problem_path"], req["params"], req["dtype"], req["device"], req["model_seed"],
                      req["seed"], req["round"], req["input_transform"], req.get("allow_tf32", False)], sort_keys=True)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    module = load_module(Path(req["problem_path"]), req["params"])
    device, dtype = req["device"], req["dtype"]
    torch.backends.cuda.matmul.allow_tf32 = bool(req.get("allow_tf32", False))
    torch.backends.cudnn.allow_tf32 = bool(req.get("allow_tf32", False))
    inputs = make_inputs(module, dtype, device, req["seed"], req["round"], req["input_transform"])
    model = make_reference_model(module, dtype, device, req["model_seed"])
    with torch.no_grad():
        libs = [t.detach() for t in flatten_outputs(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))]
        try:
            model64 = make_reference_model(module, "float64", device, req["model_seed"])
            in64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            refs = [t.detach().double() for t in flatten_outputs(model64(*in64))]
        except (RuntimeError, TypeError, NotImplementedError):
            # op without a float64 kernel on this device: fall back to float32 on upcast inputs
            model32 = make_reference_model(module, "float32", device, req["model_seed"])
            in32 = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            refs = [t.detach().double() for t in flatten_outputs(model32(*in32))]
    limit = _cache_limit_bytes()
    if _nbytes((refs, libs)) <= limit:
        _CACHE[key] = (refs, libs)
        while len(_CACHE) > _CACHE_MAX_ENTRIES or sum(_nbytes(e) for e in _CACHE.values()) > limit:
            _CACHE.popitem(last=False)
    return refs, libs


def handle(req: dict) -> dict:
    import torch

    if req.get("op") == "ping":
        return {"ok": True}
    if req.get("op") != "compare":
        return {"ok": False, "status": "HARNESS_ERROR", "detail": f"unknown op {req.get('op')!r}"}
    t0 = time.perf_counter()
    refs, libs = _reference(req)
    if refs and refs[0].is_cuda:
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    res = _check(req, refs, libs)
    if refs and refs[0].is_cuda:
        torch.cuda.synchronize()
    res["ref_s"], res["check_s"] = round(t1 - t0, 4), round(time.perf_counter() - t1, 4)
    return res


def _failed(status: str, detail: str) -> dict:
    return {"ok": False, "status": status, "detail": detail, "max_abs_err": None, "max_excess": None,
            "library_max_excess": None}


def _load_outputs(req: dict) -> list | dict:
    """The candidate's outputs (through CUDA IPC or from the hand-off file), or a failing reply."""
    import torch

    if "output_ipc" in req:
        from harness.execute.handoff import HandoffError, HandoffTampered, import_outputs

        try:
            return import_outputs(req["output_ipc"])
        except HandoffTampered as exc:
            return _failed("REWARD_HACK", f"output hand-off tampered: {exc}")
        except HandoffError as exc:
            return _failed("HARNESS_ERROR", f"candidate output could not be read over CUDA IPC ({exc}); if this "
                           "repeats for every candidate, rerun with --handoff file")
    try:
        outs = torch.load(req["output_path"], map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a tampered or truncated output file
        return _failed("INCORRECT_NUMERICAL", f"candidate output could not be read ({exc})")
    if not isinstance(outs, list) or not all(type(o) is torch.Tensor for o in outs):
        return _failed("INCORRECT_DTYPE", "candidate output is not a list of plain tensors")
    return outs


def _check(req: dict, refs: list, libs: list) -> dict:
    from harness.score.correctness import compare_outputs

    outs = _load_outputs(req)
    if isinstance(outs, dict):
        return outs
    return compare_outputs(outs, refs, libs, atol=req["atol"], rtol=req["rtol"], reduction_length=req.get("reduction_length"))


def _warm_up() -> None:
    """Pay torch's import and the CUDA context at start-up, not inside the first candidate's check."""
    import torch

    import harness.execute.inputs  # noqa: F401
    import harness.problems.loader  # noqa: F401
    import harness.score.correctness  # noqa: F401

    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        torch.empty(1, device="cuda")


def main() -> int:
    out = sys.stdout
    sys.stdout = sys.stderr  # anything printed by problem code must not corrupt the protocol
    _warm_up()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = handle(json.loads(line))
        except Exception as exc:  # noqa: BLE001
            reply = {"ok": False, "status": "HARNESS_ERROR", "detail": f"{type(exc).__name__}: {exc}",
                     "traceback_tail": traceback.format_exc()[-3000:]}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

