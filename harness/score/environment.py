"""Failures of the environment, not of the candidate: recognised, confirmed, and recorded as HARNESS_ERROR.

A worker that cannot read the interpreter's own files (a permission denial on
``sys.prefix``, site-packages or the standard library: a virtual environment
inside the checkout that the sandbox hides, a conda or user-site folder the
worker may not open) fails every candidate the same way: PermissionError at
an import, a TileLang that cannot load. Left alone those records blame the
candidates (RUNTIME_ERROR, COMPILE_ERROR) and a correct kernel gets the
failure reward. Pure functions (no I/O, no subprocess), so the rules are
tested on their own; the planner (:mod:`harness.pipeline`) applies them.

Why a claim needs confirming: a failure's text comes from the candidate's own
process, which the candidate controls. A candidate that opens a file under
site-packages for writing gets the same PermissionError, and would turn its
own failure (reward -0.5) into HARNESS_ERROR (left out) if the text alone
decided. So a record whose error names an interpreter file is only a
*suspect*; the planner holds it and runs a known-good bundled kernel (the
canary, trusted code) in a worker of the same kind. If the canary fails the
same way the environment is at fault: every suspect becomes HARNESS_ERROR
naming the cause and the fix, and a run whose first candidates all failed so
stops early (:class:`Watch`). If the canary passes, the suspects are the
candidates' own failures and are recorded as they came.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from harness.records import ErrorInfo, JobResult, Status

ENVIRONMENT_FAULT = "EnvironmentFault"
"""``error.type`` of a record this module reclassified (``--resume`` evaluates such records again)."""
FIRST_CANDIDATES = 2
"""A run whose first this-many finished candidates were all suspects stops pulling more and asks the canary."""
SUSPECT_STATUSES = (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.CRASHED, Status.INVALID_CANDIDATE)
"""Statuses that blame the candidate and that an unreadable interpreter file produces."""

_DENIED = (
    re.compile(r"\[Errno (?:13|1)\] (?:Permission denied|Operation not permitted): '(?P<path>[^']+)'"),
    re.compile(r"(?P<path>/[^\s:'\"]+): cannot open shared object file: (?:Permission denied|Operation not permitted)"),
)
"""A PermissionError (EACCES, EPERM) naming a file, and the dynamic loader's refusal to map a library."""


@dataclass(frozen=True, slots=True)
class InterpreterPaths:
    """The folders that hold the interpreter's own files, and the project folder the sandbox hides."""

    roots: tuple[str, ...]
    """sys.prefix, sys.exec_prefix, the base prefixes, site-packages (user site included), the stdlib."""
    project_root: str | None = None

    @classmethod
    def of_this_interpreter(cls, project_root: str | None = None) -> "InterpreterPaths":
        """The paths of the running interpreter (the workers run the same one)."""
        import site
        import sysconfig

        found = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
        found += [v for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
        try:
            found += list(site.getsitepackages())
        except AttributeError:  # a virtualenv's old site.py has no getsitepackages
            pass
        if site.ENABLE_USER_SITE and site.USER_SITE:
            found.append(site.USER_SITE)
        roots = tuple(dict.fromkeys(str(PurePosixPath(p)) for p in found if p))
        return cls(roots, project_root)

    def root_of(self, path: str) -> str | None:
        """The longest root that contains ``path`` (a path as the worker wrote it), or None."""
        p = PurePosixPath(path)
        inside = [r for r in self.roots if p == PurePosixPath(r) or PurePosixPath(r) in p.parents]
        return max(inside, key=len) if inside else None


@dataclass(frozen=True, slots=True)
class EnvironmentFault:
    """A worker was refused one of the interpreter's own files."""

    path: str
    """The file the worker could not open."""
    root: str
    """The interpreter folder it lies under."""
    error_type: str
    """The exception type the worker reported (PermissionError, ImportError, ...)."""

    def explain(self, project_root: str | None) -> str:
        """The cause and the fix, for a human (the record's error message)."""
        inside = project_root is not None and (PurePosixPath(self.root) == PurePosixPath(project_root)
                                               or PurePosixPath(project_root) in PurePosixPath(self.root).parents)
        cause = (f"the worker could not read {self.path} ({self.error_type}, permission denied), a file of the "
                 f"Python environment under {self.root}: the environment is at fault, not the candidate")
        if inside:
            fix = (f"the environment lies inside the project folder {project_root}, which the workers' sandbox "
                   "hides from candidates; create it outside the project (python -m venv ~/.venvs/kernelgate) and "
                   "install KernelGate there, or use a KernelGate whose sandbox grants the interpreter's own files")
        else:
            fix = (f"make {self.root} readable by the user running KernelGate (the workers' sandbox grants the "
                   "interpreter's folders for reading; the file's own permissions still apply)")
        return f"{cause}. Fix: {fix}; then run again ('kernelgate run --resume' evaluates these records again)"


def fault_of(record: JobResult, paths: InterpreterPaths) -> EnvironmentFault | None:
    """The environment fault ``record``'s error names, or None (a claim until :class:`Watch` confirms it)."""
    if record.status not in SUSPECT_STATUSES or record.error is None:
        return None
    text = f"{record.error.message}\n{record.error.traceback_tail}"
    for pattern in _DENIED:
        for m in pattern.finditer(text):
            root = paths.root_of(m.group("path"))
            if root is not None:
                return EnvironmentFault(m.group("path"), root, record.error.type)
    return None


def as_harness_error(record: JobResult, fault: EnvironmentFault, paths: InterpreterPaths) -> JobResult:
    """``record`` as HARNESS_ERROR (:data:`ENVIRONMENT_FAULT`) naming the cause and the fix; the worker's own
    error is kept below the explanation."""
    err = record.error
    assert err is not None
    kept = f"{err.type}: {err.message}\n{err.traceback_tail}".strip()
    return record.replace(status=Status.HARNESS_ERROR, error=ErrorInfo(ENVIRONMENT_FAULT, fault.explain(paths.project_root),
                                                                       kept[-3000:]),
                          evidence=None, timing=None, library_timing=None, screening=None, trusted_timing=None,
                          kernels=None, verification=None)


def is_environment_fault(record: JobResult) -> bool:
    """Whether ``record`` was recorded as an environment fault (evaluated again by ``--resume``)."""
    return record.status is Status.HARNESS_ERROR and record.error is not None and record.error.type == ENVIRONMENT_FAULT


@dataclass
class Watch:
    """Which finished tasks' records to hold, when to stop a run early, and what to write once the canary spoke.

    Feed it every finished task's records in completion order (:meth:`see`):
    a task all of whose records are suspects is held, any other is written at
    once. When the first :data:`FIRST_CANDIDATES` finished tasks were all
    held, :attr:`stop` turns True (pull no more candidates). At the end, if
    anything is held, the planner runs the canary and calls :meth:`resolve`
    with its records.
    """

    paths: InterpreterPaths
    first: int = FIRST_CANDIDATES
    held: list[list[JobResult]] = field(default_factory=list)
    seen: int = 0
    cleared: bool = False
    """A finished task was not a suspect: the environment served at least one candidate."""

    def see(self, records: list[JobResult]) -> bool:
        """True: write ``records`` now; False: they are held until :meth:`resolve`."""
        self.seen += 1
        if records and all(fault_of(r, self.paths) is not None for r in records):
            self.held.append(records)
            return False
        self.cleared = True
        return True

    @property
    def stop(self) -> bool:
        """The first finished candidates all failed on the interpreter's files: stop pulling more."""
        return not self.cleared and self.seen >= self.first and len(self.held) >= self.first

    def resolve(self, canary: list[JobResult] | None) -> tuple[list[JobResult], EnvironmentFault | None]:
        """(records to write, the confirmed fault or None), given the canary's records (None: no canary ran).

        A canary record that is a suspect confirms the environment fault: the
        held records become HARNESS_ERROR. Otherwise (the canary passed, failed
        for another reason, or did not run) they are the candidates' own.
        """
        confirmed = next((f for f in (fault_of(r, self.paths) for r in canary or ()) if f is not None), None)
        out: list[JobResult] = []
        for records in self.held:
            for r in records:
                fault = fault_of(r, self.paths)
                out.append(as_harness_error(r, fault, self.paths) if confirmed is not None and fault is not None else r)
        self.held = []
        return out, confirmed


__all__ = ["ENVIRONMENT_FAULT", "EnvironmentFault", "FIRST_CANDIDATES", "InterpreterPaths", "Watch", "as_harness_error",
           "fault_of", "is_environment_fault"]
