"""Two runs sharing a scratch root never share, or delete, each other's folders (process.run_tag)."""

from __future__ import annotations

import threading

from harness import pipeline
from harness.execute.parent import children
from harness.execute.parent.process import make_scratch, run_tag


def test_two_runs_of_one_day_get_different_tags():
    """Bug it stops: the tag was ``run_id[:8]`` (the date), shared by every run of a day."""
    a, b = "20261202T163306Z-9dcb42", "20261202T163306Z-7ff359"
    assert a[:8] == b[:8] and run_tag(a) != run_tag(b) and run_tag(a) == "9dcb42"
    assert run_tag("no-suffix") == "suffix" and run_tag("plain") == "plain"


def test_an_interrupted_runs_cleanup_leaves_the_other_runs_folders(tmp_path, monkeypatch):
    mine, other = "20261202T163306Z-aaaaaa", "20261202T170000Z-bbbbbb"
    my_worker = make_scratch(tmp_path, f"{run_tag(mine)}-cafe")
    other_worker = make_scratch(tmp_path, f"{run_tag(other)}-cafe")
    other_checker = tmp_path / f"checker-{run_tag(other)}-0"
    other_checker.mkdir()
    monkeypatch.setattr(children, "kill_all", lambda: None)  # this test started no processes
    pipeline._interrupted(threading.Event(), threading.Event(), tmp_path, mine)
    assert not my_worker.exists() and other_worker.is_dir() and other_checker.is_dir()
