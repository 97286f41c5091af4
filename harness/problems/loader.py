"""Load one problem file: a KernelBench module plus optional ``KERNELGATE`` metadata.

The format is documented in ``docs/problem-format.md``. Problem files are
trusted; they are executed as modules (never by the candidate-facing parent in
a way that touches CUDA: ``get_inputs`` must build CPU tensors).

This module validates the metadata and assembles the :class:`~harness.problems.problem.Problem`;
running the file at a workload's sizes and computing that workload's FLOPs and bytes is
:mod:`harness.problems.workloads`; secret ranges are :mod:`harness.problems.secret`. A problem whose
metadata declares no FLOPs/bytes is costed on meta tensors and marked ``derived=True``.
:attr:`Workload.params` holds the final values of every size constant.

The records and helpers other modules import from here (``Problem``, ``Workload``, ``ProblemError``,
``DTYPES``, ``load_module``, ``build_workload``, ...) are re-exported from the modules that define them.
"""

from __future__ import annotations

import hashlib
import types
from pathlib import Path
from typing import Any

from harness import astparse
from harness.problems.categories import CATEGORIES, classify
from harness.problems.kernelbench import problem_level
from harness.problems.problem import (  # noqa: F401 - re-exported
    DEFAULT_TOLERANCE, DTYPES, ELEM_BYTES, MODES, Problem, ProblemError, Workload,
)
from harness.problems.secret import parse_secret_spec
from harness.problems.sizes import SizeOverrides, effective_sizes
from harness.problems.workloads import (  # noqa: F401 - re-exported
    DEFAULT_DERIVE_BUDGET_S, WorkloadContext, build_workload, build_workload_in, default_workload_name,
    derive_budget_s, derive_cost, derived_cost, eval_expr, exec_module, load_module, problem_context, require,
    split_bytes,
)

_KNOWN_META_KEYS = {
    "id", "category", "library_op", "library_aten", "flops", "bytes", "read_bytes", "write_bytes", "reduction_length",
    "workloads", "tolerance", "allow_tf32", "input_transform", "in_place", "tags", "description", "secret", "level",
    "mode",
}
_KNOWN_WORKLOAD_KEYS = {"name", "set", "dtype", "tags", "tolerance", "allow_tf32"}
_INPUT_TRANSFORMS = ("any", "positive", "scale", "none")
#: Import names whose pip package is spelled differently.
_PIP_NAMES = {"sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml"}


def import_error_text(exc: BaseException) -> str:
    """A problem file's import failure as advice: a missing package is named with the command that fixes it."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        pip = _PIP_NAMES.get(top, top)
        return (f"it imports '{exc.name}', which is not installed here; install it (pip install {pip}) or leave "
                "this file out of --problems")
    return f"importing it raised {type(exc).__name__}: {exc}"


def _resolve_overrides(path: Path, pid: str, base: types.ModuleType, overrides: SizeOverrides,
                       strict: bool) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The overrides that apply to this file (common ones it has + scoped ones) and the common ones skipped."""
    have = set(vars(base))
    applied: dict[str, Any] = {}
    skipped: list[str] = []
    for key, value in overrides.common.items():
        if key in have:
            applied[key] = value
        elif strict:
            consts = sorted(effective_sizes(vars(base), astparse.parse(path.read_bytes())))
            raise ProblemError(path, f"--set {key}", f"the module has no constant '{key}'; it has {consts}")
        else:
            skipped.append(key)
    for key, value in overrides.scoped_for(path.stem, pid).items():
        if key not in have:
            consts = sorted(effective_sizes(vars(base), astparse.parse(path.read_bytes())))
            raise ProblemError(path, f"--set {pid}:{key}", f"the module has no constant '{key}'; it has {consts}")
        applied[key] = value
    return applied, tuple(skipped)


def load_problem(path: str | Path, *, overrides: SizeOverrides | dict[str, Any] | None = None,
                 precision: str = "float32", strict_overrides: bool = True,
                 derive_budget: float | None = None) -> Problem:
    """Load and validate one problem file. Raises :class:`ProblemError` on any defect.

    ``overrides``: ``--set`` values (a :class:`SizeOverrides`, or a plain dict
    applying to this file). With ``strict_overrides`` (one file), a common
    override the file lacks is an error; without it (a folder), it is skipped
    and listed in :attr:`Problem.skipped_overrides`. A scoped override
    (``PROBLEM:NAME``) the file lacks is always an error.

    ``precision``: dtype of the derived default workload of a plain
    KernelBench file (KernelBench's evaluator offers fp32/fp16/bf16);
    annotated problems declare their own dtypes. ``derive_budget``: seconds
    one forward on meta tensors may take (None: ``$KERNELGATE_DERIVE_BUDGET_S``
    or the default; 0: no limit).
    """
    path = Path(path)
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise ProblemError(path, "<file>", f"cannot be read ({exc.strerror}); check the path and permissions") from None
    require(precision in DTYPES, path, "precision", f"'{precision}' is not one of {DTYPES}")
    sha = hashlib.sha256(source).hexdigest()
    ov = SizeOverrides.coerce(overrides)
    try:
        base, _ = exec_module(path, None)
    except ProblemError:
        raise
    except Exception as exc:  # noqa: BLE001 - any error in a problem file is reported, never raised raw
        raise ProblemError(path, "<module>", import_error_text(exc)) from None
    for name in ("Model", "get_inputs", "get_init_inputs"):
        require(hasattr(base, name), path, name, "missing; a KernelBench problem defines Model, get_inputs and get_init_inputs")

    raw_meta = getattr(base, "KERNELGATE", None)
    kernelbench = raw_meta is None
    require(raw_meta is None or isinstance(raw_meta, dict), path, "KERNELGATE", "must be a dict")
    meta = dict(raw_meta or {})
    unknown = set(meta) - _KNOWN_META_KEYS
    require(not unknown, path, "KERNELGATE", f"unknown key(s) {sorted(unknown)}; known keys: {sorted(_KNOWN_META_KEYS)}")

    pid = meta.get("id", path.stem)
    require(isinstance(pid, str) and bool(pid) and pid.replace("_", "").replace("-", "").isalnum(), path, "id",
             f"'{pid}' must be letters, digits, '_' or '-'")
    if "category" in meta:
        require(meta["category"] in CATEGORIES, path, "category", f"'{meta['category']}' is not one of {CATEGORIES}")
    library_aten = tuple(meta.get("library_aten", ()))
    require(all(isinstance(a, str) and a.startswith("aten.") for a in library_aten), path, "library_aten",
             "must be a list of names like 'aten.native_layer_norm'")
    input_transform = meta.get("input_transform", "any")
    require(input_transform in _INPUT_TRANSFORMS, path, "input_transform", f"must be one of {_INPUT_TRANSFORMS}")
    prob_tol = meta.get("tolerance", {})
    require(isinstance(prob_tol, dict), path, "tolerance", "must map dtype names to {'atol':..,'rtol':..}")
    mode = meta.get("mode", "train" if kernelbench else "eval")
    require(mode in MODES, path, "mode", f"'{mode}' is not one of {MODES} (the module mode forward runs in)")
    declared_level = meta.get("level")
    require(declared_level is None or (isinstance(declared_level, int) and not isinstance(declared_level, bool)
                                        and declared_level >= 1), path, "level", "must be a KernelBench level (1, 2, 3, ...)")
    has_read, has_write = "read_bytes" in meta, "write_bytes" in meta
    require(has_read == has_write, path, "read_bytes" if has_read else "write_bytes",
             "declare both read_bytes and write_bytes, or neither")
    if "flops" in meta or "bytes" in meta or has_read:
        require("flops" in meta and ("bytes" in meta or has_read), path, "flops" if "flops" not in meta else "bytes",
                 "declare 'flops' together with 'bytes' (or 'read_bytes' and 'write_bytes'), or neither (derived)")

    applied, skipped = _resolve_overrides(path, pid, base, ov, strict_overrides)
    ctx = WorkloadContext(path=path, source_sha256=sha, meta=meta, overrides=applied, budget_s=derive_budget_s(derive_budget),
                   prob_tol=prob_tol, prob_tf32=bool(meta.get("allow_tf32", False)))

    raw_workloads = meta.get("workloads")
    if raw_workloads is None:
        raw_workloads = [{"name": default_workload_name(precision), "set": {}, "dtype": precision,
                          "tags": ["smoke", "gpu"]}]
    require(isinstance(raw_workloads, list) and bool(raw_workloads), path, "workloads", "must be a non-empty list")

    workloads: list[Workload] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_workloads):
        where = f"workloads[{i}]"
        require(isinstance(raw, dict), path, where, "must be a dict with name, set, dtype, tags")
        bad = set(raw) - _KNOWN_WORKLOAD_KEYS
        require(not bad, path, where, f"unknown key(s) {sorted(bad)}; known: {sorted(_KNOWN_WORKLOAD_KEYS)}")
        name = raw.get("name")
        require(isinstance(name, str) and bool(name) and name not in seen, path, f"{where}.name",
                 "must be a unique non-empty string")
        seen.add(name)
        dtype = raw.get("dtype", "float32")
        require(dtype in DTYPES, path, f"{where}.dtype", f"'{dtype}' is not one of {DTYPES}")
        set_ = raw.get("set", {})
        require(isinstance(set_, dict), path, f"{where}.set", "must map constant names to values")
        workloads.append(build_workload_in(ctx, name=name, set_=dict(set_), dtype=dtype, tags=tuple(raw.get("tags", ())),
                                           tolerance=raw.get("tolerance"), allow_tf32=raw.get("allow_tf32"), where=where))

    if "category" in meta:
        category, category_source = meta["category"], "declared"
    else:
        category, category_source = classify(pid, ctx.costs[0] if ctx.costs else None)
    level, level_source = problem_level(path, pid, declared_level)

    secret = None
    if "secret" in meta:
        secret = parse_secret_spec(meta["secret"], path=path, sizes=workloads[0].params)

    return Problem(
        id=pid, category=category, path=path.resolve(), source_sha256=sha,
        library_op=str(meta.get("library_op", "torch (reference Model)")), library_aten=library_aten,
        input_transform=input_transform, in_place=bool(meta.get("in_place", False)),
        derived=not ("flops" in meta), workloads=tuple(workloads),
        description=(base.__doc__ or "").strip().splitlines()[0] if (base.__doc__ or "").strip() else "",
        overrides=applied, level=level, kernelbench=kernelbench, default_mode=mode, category_source=category_source,
        secret=secret, skipped_overrides=skipped, level_source=level_source,
    )
