"""--set: overrides written into the module source (derived constants follow), scoped per problem, effective sizes."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from harness.problems.loader import ProblemError, load_module, load_problem
from harness.problems.registry import load_registry, parse_set_options
from harness.problems.sizes import apply_overrides, effective_sizes, parse_set_items

KB = Path(__file__).parents[1] / "fixtures" / "kernelbench"
BODY = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(M, 4)]

def get_init_inputs():
    return []
"""


def write(folder: Path, name: str, head: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(head) + BODY)
    return path


def test_derived_constants_are_recomputed(tmp_path):
    path = write(tmp_path, "derived.py", "N = 8\nM = 2 * N\n")
    module = load_module(path, {"N": 16})
    assert (module.N, module.M) == (16, 32)
    (w,) = load_problem(path, overrides={"N": 16}).workloads
    assert w.params == {"N": 16, "M": 32} and w.overrides == {"N": 16}
    assert w.input_bytes == 32 * 4 * 4


@pytest.mark.parametrize("head,expect", [
    ("height = width = 12\nAREA = height * width\n", {"height": 20, "width": 12, "AREA": 240}),
    ("A, B = 3, 4\nC = A + B\n", {"A": 3, "B": 10, "C": 13}),
    ("M: int = 4\nM += 1\nK = M * 2\n", {"M": 7, "K": 14}),
    ("if True:\n    M = 4\nelse:\n    M = 5\nK = M + 1\n", {"M": 9, "K": 10}),
    ("M = 4; K = M * 3\n", {"M": 6, "K": 18}),
])
def test_override_follows_the_last_binding(head, expect):
    tree = ast.parse(head)
    override = {k: v for k, v in expect.items() if k in ("height", "B", "M")}
    tree, unbound = apply_overrides(tree, override)
    ns: dict = {}
    exec(compile(tree, "<t>", "exec"), ns)  # noqa: S102 - test code
    assert not unbound and {k: ns[k] for k in expect} == expect


def test_tuple_values_and_lists_back_to_tuples(tmp_path):
    path = write(tmp_path, "tup.py", "M = 2\nkernel_size = (3, 5)\n")
    assert load_module(path, {"kernel_size": [7, 9]}).kernel_size == (7, 9)
    assert parse_set_items(["kernel_size=(7, 9)"]).common == {"kernel_size": (7, 9)}


def test_line_numbers_are_the_files(tmp_path):
    path = tmp_path / "boom.py"
    path.write_text("N = 4\nM = N\n\ndef get_inputs():\n    raise RuntimeError('line 5')\n")
    module = load_module(path, {"N": 8})
    with pytest.raises(RuntimeError) as exc:
        module.get_inputs()
    assert exc.traceback[-1].lineno + 1 == 5 and str(exc.traceback[-1].path) == str(path)


def test_effective_sizes_leave_out_non_sizes(tmp_path):
    path = write(tmp_path, "k.py", "M = 4\neps = 1e-5\nflag = True\n_private = 3\nname = 'x'\nshape = (M, 2)\n")
    module = load_module(path)
    assert effective_sizes(vars(module), ast.parse(path.read_text())) == {"M": 4, "eps": 1e-5, "shape": (4, 2)}


def test_scoped_set_applies_to_one_problem_only(tmp_path):
    write(tmp_path, "a.py", "M = 4\n")
    write(tmp_path, "b.py", "M = 4\n")
    reg = load_registry(tmp_path, overrides=parse_set_options(["a:M=8"]))
    assert reg.get("a").workloads[0].params["M"] == 8 and reg.get("b").workloads[0].params["M"] == 4
    assert reg.get("a").overrides == {"M": 8}


def test_scoped_set_beats_common_and_unknown_scope_is_an_error(tmp_path):
    write(tmp_path, "a.py", "M = 4\n")
    reg = load_registry(tmp_path, overrides=parse_set_options(["M=6", "a:M=8", "nope:M=1"]))
    assert reg.get("a").workloads[0].params["M"] == 8
    (err,) = reg.errors
    assert err.field == "nope:M" and "no problem 'nope' is loaded" in str(err)


def test_scoped_set_of_a_missing_constant_is_an_error(tmp_path):
    write(tmp_path, "a.py", "M = 4\n")
    reg = load_registry(tmp_path, overrides=parse_set_options(["a:Q=8"]))
    (err,) = reg.errors
    assert err.field == "--set a:Q" and "no constant 'Q'" in str(err)


def test_common_set_skips_files_without_the_constant_and_says_so_once():
    """Two sizes set over a folder of KernelBench files: the files that lack them still load."""
    reg = load_registry(KB, overrides=parse_set_options(["batch_size=4", "dim=256"]))
    assert not reg.errors, [str(e) for e in reg.errors]
    relu = reg.get("19_ReLU").workloads[0]
    assert relu.params == {"batch_size": 4, "dim": 256}
    assert reg.get("1_Square_matrix_multiplication_").skipped_overrides == ("batch_size", "dim")
    assert len(reg.warnings) == 2 and all("not applied to" in w for w in reg.warnings)
    assert any("--set dim=256 not applied to" in w and "1_Square_matrix_multiplication_" in w for w in reg.warnings)


def test_common_set_matching_nothing_suggests_a_name():
    reg = load_registry(KB, overrides=parse_set_options(["batch_szie=4"]))
    assert any("applied to no problem" in w and "did you mean 'batch_size'" in w for w in reg.warnings)


def test_single_file_keeps_the_strict_error():
    with pytest.raises(ProblemError, match=r"no constant 'M'.*'N'"):
        load_problem(KB / "1_Square_matrix_multiplication_.py", overrides={"M": 3})
    (err,) = load_registry(KB / "1_Square_matrix_multiplication_.py", overrides={"M": 3}).errors
    assert err.field == "--set M"


@pytest.mark.parametrize("item,match", [("N", "NAME=VALUE"), ("1N=3", "identifier"), (":N=3", "nothing before"),
                                        ("N=", "no value")])
def test_malformed_set_options(item, match):
    with pytest.raises(ValueError, match=match):
        parse_set_items([item])


@pytest.mark.parametrize("item,says", [
    ("19_Relu:dim=1024", r"--set 19_Relu:dim=1024: no problem '19_Relu' is loaded; did you mean '19_ReLU'\?"),
    ("19_ReLU:dmi=1024", r"--set 19_ReLU:dmi: .*19_ReLU.py: the module has no constant 'dmi'; it has \['batch_size', 'dim'\]"),
    ("batch_szie=4", r"--set batch_szie=4: none of the \d+ loaded problem\(s\) has a constant 'batch_szie'; "
                     r"did you mean 'batch_size'"),
])
def test_a_set_that_names_nothing_stops_the_cli_before_anything_runs(item, says, capsys):
    """Was a warning: '--set 19_Relu:dim=1024' ran KernelBench's full size (a 7 GB worker, TIMEOUT after 420 s)."""
    from harness.cli import main

    with pytest.raises(SystemExit, match=says) as exc:
        main(["problems", "list", "--problems", str(KB), "--set", item])
    assert exc.value.code not in (0, None)


def test_a_set_that_applies_somewhere_still_runs(capsys):
    from harness.cli import main

    assert main(["problems", "list", "--problems", str(KB), "--set", "19_ReLU:dim=1024", "--set", "batch_size=4"]) == 0
    assert "--set batch_size=4 not applied to 1 of" in capsys.readouterr().err  # over a folder: a warning, as before


def test_the_api_refuses_the_same_mistakes_and_takes_scoped_keys():
    from harness.api import resolve_problem

    with pytest.raises(ValueError, match="did you mean '19_ReLU'"):
        resolve_problem("19_ReLU", problems=KB, overrides={"19_Relu:dim": 1024})
    with pytest.raises(ValueError, match="did you mean 'dim'"):
        resolve_problem("19_ReLU", problems=KB, overrides={"dmi": 1024})
    prob = resolve_problem("19_ReLU", problems=KB, overrides={"19_ReLU:dim": 1024})
    assert prob.workloads[0].params["dim"] == 1024
