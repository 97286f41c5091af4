"""The KernelBench device run's tools: the corpus's native sample and the agreement table."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "kernelbench"


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f"kb_{name}", TOOLS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_native_sample_covers_every_level1_problem_once_and_every_fifth_level2_problem():
    fetch = _tool("fetch_corpus")
    entries = json.loads((TOOLS / "corpus.json").read_text())["entries"]
    sample = fetch.native_sample(entries)
    level1 = [e for e in sample if e["level"] == 1]
    level2 = [e for e in sample if e["level"] == 2]
    assert len({e["problem_id"] for e in level1}) == len(level1) == 100
    assert {int(e["problem_id"].split("_")[0]) for e in level2} <= set(range(1, 101, 5)) and len(level2) >= 15
    assert {e["dsl"] for e in sample} == {"triton", "tilelang"} and len({e["model"] for e in sample}) >= 3
    assert fetch.native_sample(list(reversed(entries))) == sample  # deterministic, whatever the corpus's order


def test_agreement_joins_by_kernel_file_and_names_refusals_and_the_harnesss_own(tmp_path):
    agreement = _tool("agreement")

    def kg(cand, status, **kw):
        return {"candidate": cand, "status": status, "created_at": "2026-12-02T05:00:00+00:00", **kw}

    kg_rows = [kg("m/1_A.py", "PASSED", screening={"verdict": "efficient", "e_lib": 1.5}),
               kg("m/2_B.py", "INCORRECT_NUMERICAL", error={"message": "round 0: out of tolerance"}),
               kg("m/3_C.py", "RUNTIME_ERROR", error={"message": "forward raised"}),
               kg("m/4_D.py", "REWARD_HACK", error={"message": "library fallback"}),
               kg("m/5_E.py", "TOO_LARGE", error={"message": "too large"})]
    kg_rows[-1]["created_at"] = "2026-12-02T05:01:00+00:00"
    ind = [{"kernel": f".kb/sample/m/{n}.py", "status": s, "precision": "fp32", "max_abs_diff": 0.0}
           for n, s in (("1_A", "correct"), ("2_B", "correct"), ("3_C", "error"), ("4_D", "correct"), ("5_E", "correct"))]
    kb = [{"kernel": f"x/m/{n}.py", "status": s} for n, s in (("1_A", "correct"), ("2_B", "incorrect"),
                                                             ("3_C", "incorrect"), ("4_D", "correct"), ("5_E", "correct"))]
    text = agreement.render(kg_rows, ind, kb, {"kb_eval": 60.0})
    assert "independent no 1" in text and "independent yes 2" in text and "kb_eval yes 3" in text
    assert "refused 1" in text and "harness 1" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| m/")]
    assert rows[0].startswith("| m/2_B.py | INCORRECT_NUMERICAL")  # disagreements first
    assert "| KernelGate | 5 | 60 s first to last record | 300 |" in text and "| kb_eval | 5 | 60 s wall | 300 |" in text
