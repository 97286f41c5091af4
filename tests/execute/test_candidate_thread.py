"""The candidate's thread keeps nothing of a request once it is answered.

Leak it stops: the thread's frame held the last request's arguments until the next request came. A checker keeps
one such thread per library context, so each held its last inputs (a timed batch's up to 6 GiB); on the H200 three
idle checkers held 27-39 GiB each and a neighbour ran out of memory.
"""

from __future__ import annotations

import gc
import weakref

import pytest

from harness.execute.shared.threads import THREAD_NAME, CandidateThread, forward, run_all


class Blob:
    """Stands in for an input tensor: something a weak reference can watch."""


def _gone(ref: weakref.ref) -> bool:
    gc.collect()
    return ref() is None


@pytest.fixture
def thread():
    t = CandidateThread()
    yield t
    t.stop()
    t.thread.join(timeout=5)


def test_the_arguments_of_an_answered_request_are_not_held(thread):
    blob = Blob()
    ref = weakref.ref(blob)
    assert thread.run(lambda b: 42, blob) == 42
    del blob
    assert _gone(ref), "the idle candidate thread still holds the last request's argument"


def test_a_batch_inputs_are_not_held_after_the_batch(thread):
    blobs = [Blob() for _ in range(4)]
    refs = [weakref.ref(b) for b in blobs]
    outs, failed = thread.run(run_all, lambda b: None, [(b,) for b in blobs])
    assert failed is None and outs == [None] * 4
    del blobs
    assert all(_gone(r) for r in refs)


def test_the_result_lives_only_as_long_as_the_caller_keeps_it(thread):
    result = thread.run(Blob)
    ref = weakref.ref(result)
    del result
    assert _gone(ref)


def test_the_arguments_of_a_failed_request_go_with_its_exception(thread):
    blob = Blob()
    ref = weakref.ref(blob)

    def boom(b):
        raise ValueError("candidate error")

    with pytest.raises(ValueError, match="candidate error"):
        thread.run(boom, blob)
    del blob
    assert _gone(ref)


def test_forward_runs_the_model_without_autograd(thread):
    torch = pytest.importorskip("torch")
    w = torch.ones(3, requires_grad=True)
    (out,) = thread.run(forward, lambda x: x * w, [torch.ones(3)], 0)
    assert not out.requires_grad


def test_forward_frees_the_candidates_container_on_its_own_thread(thread):
    """The candidate's result comes back as a plain list; its own container (here a list subclass with a
    finalizer) is freed on the candidate's thread, inside the call. Exploit it stops: the trusted thread freed it
    after the call's clock, and the finalizer (a C function) did the forward's work there
    (exploits/gelu__finalizer_fills_output.py)."""
    import threading
    import weakref

    torch = pytest.importorskip("torch")
    freed_on = []

    class Outs(list):
        pass

    def model(x):
        res = Outs([x + 1])
        weakref.finalize(res, lambda: freed_on.append(threading.current_thread().name))
        return res

    out = thread.run(forward, model, [torch.ones(2)], None)
    assert type(out) is list and torch.equal(out[0], torch.full((2,), 2.0))
    assert freed_on == [THREAD_NAME], freed_on
