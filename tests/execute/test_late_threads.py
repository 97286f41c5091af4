"""Threads a forward leaves running: those that may run candidate code are counted (REWARD_HACK late_thread), those
whose code is a library's are not.

Exploit it stops: a thread started in the forward that fills its outputs after it returned. Honest code it must
not accuse: tqdm starts a monitor thread the first time a progress bar is made and keeps it for the life of the
process (a generated kernel's hand-rolled config sweep with a progress bar was REWARD_HACK); a thread pool's
workers.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time

from harness.execute.worker.guards import candidate_threads


def _wait(event: threading.Event) -> None:
    event.wait(10)


def test_library_threads_are_not_the_candidates_and_its_own_are(tmp_path):
    roots = (str(tmp_path) + "/",)
    before = {t.ident for t in threading.enumerate()}
    stop = threading.Event()

    class Monitor(threading.Thread):  # a library's Thread subclass (defined here, outside ``roots``)
        def run(self):
            stop.wait(10)

    lib = [Monitor(daemon=True), threading.Thread(target=_wait, args=(stop,), daemon=True)]
    for t in lib:
        t.start()
    pool = concurrent.futures.ThreadPoolExecutor(2)
    pool.submit(stop.wait, 10)
    try:
        assert candidate_threads(before, roots) == 0
        # a function of the candidate's file as a thread's target: counted
        cand = tmp_path / "cand.py"
        cand.write_text("def fill(event):\n    event.wait(10)\n")
        ns: dict = {}
        exec(compile(cand.read_text(), str(cand), "exec"), ns)
        theirs = threading.Thread(target=ns["fill"], args=(stop,), daemon=True)
        theirs.start()
        # a C callable: its code cannot be told, so it counts
        opaque = threading.Thread(target=time.sleep, args=(0.5,), daemon=True)
        opaque.start()
        assert candidate_threads(before, roots) == 2
    finally:
        stop.set()
        pool.shutdown()
