"""Self-check of the problem files: metadata, smoke forward on CPU, and bytes/flops expressions vs real shapes.

Every `problems/<category>/<id>.py` is imported from its path; its smoke workload runs on
real CPU tensors and its GPU workloads run on the meta device, and the `bytes` expression is
compared with the bytes of every input, parameter, buffer and output actually produced.
"""
import ast
import importlib.util
import itertools
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[2]
PROBLEM_FILES = sorted(p for p in (ROOT / "problems").glob("*/*.py") if not p.name.startswith("_"))

CATEGORIES = {"normalization", "reduction", "convolution", "gemm", "elementwise"}
REQUIRED_KEYS = {"category", "library_op", "library_aten", "flops", "bytes", "workloads"}
OPTIONAL_KEYS = {"reduction_length", "id", "tolerance", "allow_tf32", "input_transform", "in_place", "tags", "secret"}
WORKLOAD_KEYS = {"name", "set", "dtype", "tags", "tolerance", "allow_tf32"}
ELEM = {"float32": 4, "float16": 2, "bfloat16": 2}
MIN_GPU_BYTES = 180e6

# Problems whose library op is CompositeImplicit on CPU, so the CPU forward dispatches only
# to generic helpers (pow/mean/rsqrt); their listed aten ops are the CUDA-side ones.
CPU_DECOMPOSED = {"rmsnorm"}
# Categories whose analytic FLOPs must match torch's FlopCounterMode exactly.
FLOP_COUNTED = {"gemm", "convolution"}

_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.Call,
                  ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.USub, ast.UAdd)


def _ids(paths):
    return [f"{p.parent.name}/{p.stem}" for p in paths]


def load(path: Path):
    """Import a problem file as a fresh module, so constant overrides never leak between tests."""
    spec = importlib.util.spec_from_file_location(f"_selfcheck_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def constants(module) -> dict:
    return {k: v for k, v in vars(module).items() if k.isupper() and k != "KERNELGATE" and isinstance(v, int)}


def evaluate(expr: str, module, elem: int):
    """Evaluate a metadata expression with the grammar the format allows."""
    tree = ast.parse(expr, mode="eval")
    for node in ast.walk(tree):
        assert isinstance(node, _ALLOWED_NODES), f"disallowed syntax {type(node).__name__} in {expr!r}"
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name) and node.func.id in {"min", "max"}, expr
    names = {**constants(module), "ELEM": elem, "min": min, "max": max}
    return eval(compile(tree, expr, "eval"), {"__builtins__": {}}, names)


def apply(module, workload: dict) -> None:
    for name, value in workload["set"].items():
        setattr(module, name, value)


def tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


def traffic_elements(model, inputs, output) -> int:
    """Elements of every input, parameter, buffer and output: each moved once."""
    state = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() for t in itertools.chain(tensors(inputs), state, tensors(output)))


class AtenRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(f"aten.{func.overloadpacket.__name__}")
        return func(*args, **(kwargs or {}))


def workloads(module, tag: str):
    return [w for w in module.KERNELGATE["workloads"] if tag in w["tags"]]


GPU_CASES = [(path, w["name"]) for path in PROBLEM_FILES for w in workloads(load(path), "gpu")]


def test_problem_set_is_present():
    assert len(PROBLEM_FILES) >= 20


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=_ids(PROBLEM_FILES))
def test_metadata(path):
    module = load(path)
    meta = module.KERNELGATE
    assert module.__doc__ and module.__doc__.strip() and "\n" not in module.__doc__.strip()
    assert REQUIRED_KEYS <= meta.keys() and meta.keys() <= REQUIRED_KEYS | OPTIONAL_KEYS
    assert meta["category"] in CATEGORIES and meta["category"] == path.parent.name
    assert meta.get("id", path.stem) == path.stem
    assert meta.get("input_transform", "any") in ("any", "scale")

    target = __import__(meta["library_op"].split(".")[0])
    for part in meta["library_op"].split(".")[1:]:
        target = getattr(target, part)
    assert callable(target)
    assert meta["library_aten"], "library_aten must name at least one op"
    for op in meta["library_aten"]:
        assert op.startswith("aten.") and hasattr(torch.ops.aten, op[len("aten."):]), op

    names = [w["name"] for w in meta["workloads"]]
    assert len(names) == len(set(names))
    assert len(workloads(module, "smoke")) == 1 and workloads(module, "smoke")[0]["name"] == "smoke"
    assert workloads(module, "gpu")
    for w in meta["workloads"]:
        assert w.keys() <= WORKLOAD_KEYS and {"name", "set", "dtype", "tags"} <= w.keys()
        assert w["dtype"] in ELEM
        assert set(w["set"]) <= set(constants(module)), w["set"]
        assert "allow_tf32" not in w or w["dtype"] == "float32"
    assert workloads(module, "smoke")[0]["dtype"] == "float32"
    for w in workloads(module, "gpu"):
        assert w["dtype"] != "float32" or (meta["category"] != "gemm" or w.get("allow_tf32") is False)


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=_ids(PROBLEM_FILES))
def test_smoke_workload(path):
    module = load(path)
    meta = module.KERNELGATE
    (smoke,) = workloads(module, "smoke")
    apply(module, smoke)

    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    torch.manual_seed(0)
    inputs = module.get_inputs()
    for t in inputs:
        assert t.device.type == "cpu" and t.dtype == torch.float32
    for name, p in model.named_parameters():
        assert not (torch.all(p == 1) or torch.all(p == 0)), f"trivial parameter {name}"

    recorder = AtenRecorder()
    with torch.no_grad(), recorder:
        output = model(*inputs)
    assert all(torch.isfinite(t).all() for t in tensors(output))
    if path.stem not in CPU_DECOMPOSED:
        assert recorder.ops & set(meta["library_aten"]), sorted(recorder.ops)

    state = list(model.parameters()) + list(model.buffers())
    real_bytes = sum(t.nbytes for t in itertools.chain(tensors(inputs), state, tensors(output)))
    assert evaluate(meta["bytes"], module, 4) == real_bytes
    assert evaluate(meta["flops"], module, 4) > 0
    if "reduction_length" in meta:
        assert evaluate(meta["reduction_length"], module, 4) >= 1


@pytest.mark.parametrize("path,name", GPU_CASES, ids=[f"{p.stem}:{n}" for p, n in GPU_CASES])
def test_gpu_workload_sizes(path, name):
    module = load(path)
    meta = module.KERNELGATE
    (workload,) = [w for w in meta["workloads"] if w["name"] == name]
    apply(module, workload)
    elem = ELEM[workload["dtype"]]

    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        flop_counter = FlopCounterMode(display=False)
        with torch.no_grad(), flop_counter:
            output = model(*inputs)

    expected_bytes = evaluate(meta["bytes"], module, elem)
    assert expected_bytes == traffic_elements(model, inputs, output) * elem
    assert expected_bytes >= MIN_GPU_BYTES
    flops = evaluate(meta["flops"], module, elem)
    assert flops > 0
    if meta["category"] in FLOP_COUNTED:
        assert flops == flop_counter.get_total_flops()
