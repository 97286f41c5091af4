"""The held-out lint corpus: its manifest, and the kernel sources read from local copies of public repositories.

The corpus is public Triton and TileLang code the lint rules were not tuned
on. No third-party file is committed: ``tools/lint_eval/manifest.json`` names
each kernel by repository, commit and path (and, for a JSON-lines file of
model outputs, the record), with hand labels. This module reads a kernel's
text from a local git copy of its repository -- ``git -C DIR show
COMMIT:PATH`` -- found under a root folder in any of these layouts::

    ROOT/owner+name/repo     (what the project's fetch tool leaves)
    ROOT/owner/name          (git clone https://github.com/owner/name ROOT/owner/name)
    ROOT/name

A missing repository or commit raises :class:`CorpusError` naming the clone
command that would provide it (``--clone`` in the scripts runs it).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST = Path(__file__).with_name("manifest.json")
RULE_IDS = (
    "sequential-reduction", "fp64-promotion", "cast-in-inner-loop", "one-element-per-program", "unfused-multipass",
    "tiny-tile", "host-sync-in-forward", "non-coalesced-access", "matmul-without-tensor-cores",
)
"""The rules the corpus is labelled for (checked against the lint's registry by the measuring script)."""
SPLITS = ("A", "B")


class CorpusError(RuntimeError):
    """A manifest entry that cannot be read (names the entry, the field and the fix)."""


@dataclass(frozen=True, slots=True)
class Kernel:
    """One labelled corpus entry."""

    id: str
    pool: str
    split: str
    """``A`` (measured first) or ``B`` (held back: the fresh part a changed rule is re-measured on)."""
    repo: str
    path: str
    record: int | None
    """0-based line of a JSON-lines file whose ``predict`` field is the source; ``None`` for a plain file."""
    labels: dict[str, str] = field(default_factory=dict)
    """Rule id -> one-line reason, for each defect the kernel has; every other rule is labelled absent."""
    clean: str = ""
    """One line on why the rules not in ``labels`` are absent (what the kernel does instead)."""

    @classmethod
    def from_dict(cls, d: dict) -> "Kernel":
        known = {"id", "pool", "split", "repo", "path", "record", "labels", "clean"}
        where = f"manifest kernel {d.get('id', '?')!r}"
        if set(d) - known:
            raise CorpusError(f"{where}: unknown field(s) {sorted(set(d) - known)}; known: {sorted(known)}")
        k = cls(d["id"], d["pool"], d["split"], d["repo"], d["path"], d.get("record"), dict(d.get("labels", {})),
                d.get("clean", ""))
        if k.split not in SPLITS:
            raise CorpusError(f"{where}: field 'split' is {k.split!r}; expected one of {SPLITS}")
        bad = sorted(set(k.labels) - set(RULE_IDS))
        if bad:
            raise CorpusError(f"{where}: labels name unknown rule(s) {bad}; known: {', '.join(RULE_IDS)}")
        if any(not r.strip() or "\n" in r for r in k.labels.values()) or "\n" in k.clean:
            raise CorpusError(f"{where}: every label needs a one-line reason")
        if not k.labels and not k.clean.strip():
            raise CorpusError(f"{where}: a kernel with no defect label needs a one-line 'clean' reason")
        return k

    def to_dict(self) -> dict:
        return {"id": self.id, "pool": self.pool, "split": self.split, "repo": self.repo, "path": self.path,
                "record": self.record, "labels": dict(self.labels), "clean": self.clean}


@dataclass(frozen=True, slots=True)
class Corpus:
    sources: dict[str, dict]
    """Repository -> ``{"commit": ..., "licence": ..., "note": ...}``; one commit per repository."""
    pools: dict[str, dict]
    """Pool name -> how its kernels were drawn (repository, path patterns, count, what it is)."""
    kernels: tuple[Kernel, ...]
    seed: int
    """Seed of the draw (``tools/lint_eval/draw.py``)."""

    def commit(self, repo: str) -> str:
        try:
            return self.sources[repo]["commit"]
        except KeyError:
            raise CorpusError(f"manifest: repository {repo!r} has no entry under 'sources'") from None


def load_manifest(path: Path = MANIFEST) -> Corpus:
    """Read and validate the manifest (unique ids, known rules, every repository pinned)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    kernels = tuple(Kernel.from_dict(d) for d in data.get("kernels", []))
    ids = [k.id for k in kernels]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise CorpusError(f"{path}: duplicate kernel id(s) {dup}")
    corpus = Corpus(data["sources"], data.get("pools", {}), kernels, int(data["draw"]["seed"]))
    for k in kernels:
        corpus.commit(k.repo)
        if k.pool not in corpus.pools:
            raise CorpusError(f"{path}: kernel {k.id!r} names pool {k.pool!r}, which 'pools' does not describe")
    return corpus


def repo_dir(root: Path, repo: str) -> Path | None:
    """The local git copy of ``owner/name`` under ``root`` (any of the module's layouts), or ``None``."""
    owner, name = repo.split("/", 1)
    for cand in (root / f"{owner}+{name}" / "repo", root / owner / name, root / name):
        if cand.exists() and _git(cand, "rev-parse", "--git-dir") is not None:
            return cand
    return None


def clone(root: Path, repo: str) -> Path:
    """``git clone`` ``repo`` into ``root/owner/name`` (network; only when asked with ``--clone``)."""
    owner, name = repo.split("/", 1)
    dest = root / owner / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", f"https://github.com/{repo}", str(dest)], check=True)
    return dest


def read_kernel(root: Path, corpus: Corpus, k: Kernel) -> str:
    """The source text of kernel ``k`` at its pinned commit."""
    d = repo_dir(root, k.repo)
    commit = corpus.commit(k.repo)
    if d is None:
        raise CorpusError(f"kernel {k.id}: no local copy of {k.repo} under {root}; run "
                          f"`git clone https://github.com/{k.repo} {root}/{k.repo}` (or pass --clone)")
    text = _git(d, "show", f"{commit}:{k.path}")
    if text is None:
        raise CorpusError(f"kernel {k.id}: {k.repo} at {commit[:12]} has no {k.path} in {d}; "
                          f"`git -C {d} fetch origin {commit}` if the copy is older")
    if k.record is None:
        return text
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not 0 <= k.record < len(lines):
        raise CorpusError(f"kernel {k.id}: {k.path} has {len(lines)} records, not {k.record + 1}")
    return model_output_code(json.loads(lines[k.record])["predict"])


def model_output_code(text: str) -> str:
    """The code of one model answer: its first fenced Python block if it has one, else the whole text."""
    m = re.search(r"```(?:python|py)?\s*\n(.*?)```", text, re.S)
    return m.group(1) if m else text


def _git(d: Path, *args: str) -> str | None:
    r = subprocess.run(["git", "-C", str(d), *args], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return r.stdout
