"""LLM replies saved as candidate files: the ```python fence is extracted, the hash is of what runs."""

from __future__ import annotations

import hashlib

import pytest

from harness.candidates.discover import discover
from harness.candidates.fences import extract_source

CODE = "import torch\nimport triton\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
DRAFT = "import torch\n\ndef helper(x):\n    return x\n"


def reply(*blocks: tuple[str, str], prose: str = "Here is the optimized code:") -> str:
    parts = [prose, ""]
    for lang, code in blocks:
        parts += [f"```{lang}", code.rstrip("\n"), "```", "", "Some explanation."]
    return "\n".join(parts) + "\n"


def test_plain_python_is_taken_unchanged_even_with_a_fence_in_a_string():
    src = CODE + 'DOC = """```python\nx\n```"""\n'
    ext = extract_source(src)
    assert ext.source == src and ext.note == "" and ext.error is None and not ext.extracted


def test_one_fence_is_taken():
    ext = extract_source(reply(("python", CODE)))
    assert ext.source == CODE and ext.error is None and ext.extracted
    assert "fence at lines 4-9" in ext.note and "1 of 1" in ext.note


def test_several_fences_take_the_one_defining_model_new():
    ext = extract_source(reply(("python", DRAFT), ("cuda", "__global__ void k() {}"), ("python", CODE)))
    assert ext.source == CODE and "the only one defining ModelNew" in ext.note and "2 of 2 Python" in ext.note


def test_several_model_new_fences_take_the_last():
    final = CODE.replace("return x", "return x + 0")
    ext = extract_source(reply(("python", CODE), ("py", final)))
    assert ext.source == final and "the last of 2 defining ModelNew" in ext.note


def test_untagged_fence_and_think_block():
    text = "<think>\n```python\nclass ModelNew: draft\n```\n</think>\nFinal:\n```\n" + CODE + "```\n"
    ext = extract_source(text)
    assert ext.source == CODE and ext.error is None


def test_unclosed_fence_is_taken_with_a_note():
    ext = extract_source("Answer:\n```python\n" + CODE)
    assert ext.source == CODE and "never closed" in ext.note


def test_fences_that_do_not_parse_say_where():
    bad = "class ModelNew(torch.nn.Module:\n    pass\n"
    ext = extract_source(reply(("python", bad)))
    assert ext.error and "do not parse" in ext.error and "lines 4-5" in ext.error and "line 1" in ext.error


def test_no_python_fence_and_no_fence_at_all():
    assert "none of them Python (tagged cpp)" in extract_source(reply(("cpp", "int x;"))).error
    err = extract_source("Here is the code: class ModelNew\n").error
    assert err.startswith("not valid Python: line 1, column") and "'Here is the code: class ModelNew'" in err
    assert "no ```python fence" in err


def test_several_fences_without_model_new_are_refused():
    assert "none defining class ModelNew" in extract_source(reply(("python", DRAFT), ("python", DRAFT))).error


def test_discover_executes_and_hashes_the_extracted_code(tmp_path):
    text = reply(("python", CODE))
    (tmp_path / "19_ReLU.py").write_text(text)
    (tmp_path / "19_ReLU__plain.py").write_text(CODE)
    (tmp_path / "19_ReLU__broken.py").write_text("Sorry, I cannot help with that.\n")
    (tmp_path / "19_ReLU__latin1.py").write_bytes(b"x = '\xe9'\n")
    _, cands = discover(tmp_path, levels={"19_ReLU": 1})
    by = {c.variant: c for c in cands}
    fenced, plain = by[""], by["plain"]
    assert fenced.source == CODE and fenced.sha256 == hashlib.sha256(CODE.encode()).hexdigest()
    assert fenced.file_sha256 == hashlib.sha256(text.encode()).hexdigest() != fenced.sha256
    assert fenced.extraction.startswith("code extracted from a Markdown reply") and fenced.dsl == "triton"
    assert plain.extraction == "" and plain.sha256 == plain.file_sha256 and plain.source_error is None
    assert "line 1" in by["broken"].source_error
    assert "not UTF-8" in by["latin1"].source_error


@pytest.mark.parametrize("lang", ["python", "py", "Python3", ""])
def test_python_tags(lang):
    assert extract_source(reply((lang, CODE))).source == CODE
