"""harness.astparse: one parse at a time per process."""

from __future__ import annotations

import ast
import threading
import time

from harness import astparse


def test_parses_from_several_threads_never_overlap(monkeypatch):
    """Bug it stops: two threads building ASTs at once corrupt CPython 3.11's AST constructor state
    (``SystemError: AST constructor recursion depth mismatch``); a service batch got a HARNESS_ERROR for an
    honest candidate. Here a slowed ``ast.parse`` counts how many threads are inside it at once."""
    inside, most = [0], [0]
    lock = threading.Lock()
    real = ast.parse

    def slow_parse(*args, **kwargs):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.01)
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(astparse.ast, "parse", slow_parse)
    trees = []
    threads = [threading.Thread(target=lambda: trees.append(astparse.parse("x = 1\n"))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(trees) == 6 and most[0] == 1
    assert isinstance(astparse.parse("1 + 2", mode="eval"), ast.Expression)


def test_compiling_a_tree_takes_the_same_lock():
    tree = astparse.parse("y = 2 * 3\n")
    scope: dict = {}
    astparse._LOCK.acquire()
    try:
        done = threading.Event()
        t = threading.Thread(target=lambda: (exec(astparse.compile_tree(tree, "<t>", "exec"), scope), done.set()))
        t.start()
        assert not done.wait(0.2)  # held while another thread parses
    finally:
        astparse._LOCK.release()
    t.join()
    assert done.is_set() and scope["y"] == 6
