"""The trusted reference checker: computes reference outputs and compares.

A long-lived subprocess of the runner (``python -m harness.execute.checker``)
speaking JSON lines on stdin/stdout. It imports problem code only (trusted),
never candidate code, so the reference outputs live in a process the
candidate cannot reach. It may use the GPU; the runner never does.

Request: ``{"op": "compare", "problem_path", "params", "dtype", "device",
"model_seed", "seed", "round", "input_transform", "atol", "rtol",
"reduction_length", "output_path"}``; reply: the dict from
:func:`harness.score.correctness.compare_outputs`. References for the most
recent rounds are cached, so the candidates of one problem share them.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections import OrderedDict
from pathlib import Path

_CACHE: "OrderedDict[str, tuple[list, list]]" = OrderedDict()
_CACHE_MAX = 6


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
    _CACHE[key] = (refs, libs)
    while len(_CACHE) > _CACHE_MAX:
        _CACHE.popitem(last=False)
    return refs, libs


def handle(req: dict) -> dict:
    import torch

    from harness.score.correctness import compare_outputs

    if req.get("op") == "ping":
        return {"ok": True}
    if req.get("op") != "compare":
        return {"ok": False, "status": "HARNESS_ERROR", "detail": f"unknown op {req.get('op')!r}"}
    refs, libs = _reference(req)
    try:
        outs = torch.load(req["output_path"], map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a tampered or truncated output file
        return {"ok": False, "status": "INCORRECT_NUMERICAL", "detail": f"candidate output could not be read ({exc})",
                "max_abs_err": None, "max_excess": None, "library_max_excess": None}
    if not isinstance(outs, list) or not all(type(o) is torch.Tensor for o in outs):
        return {"ok": False, "status": "INCORRECT_DTYPE", "detail": "candidate output is not a list of plain tensors",
                "max_abs_err": None, "max_excess": None, "library_max_excess": None}
    return compare_outputs(outs, refs, libs, atol=req["atol"], rtol=req["rtol"], reduction_length=req.get("reduction_length"))


def main() -> int:
    out = sys.stdout
    sys.stdout = sys.stderr  # anything printed by problem code must not corrupt the protocol
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

