"""The service's durable state: the task queue and record index (SQLite, WAL) and ``results.jsonl``.

Layout of the service's results folder::

    RESULTS/results.jsonl        every record, as kernelgate run writes them (leaderboard/report read it)
    RESULTS/serve/queue.sqlite   tasks (queued / running / done) and each task's records

Guarantees, and how:

* **Nothing accepted is lost.** A submission is answered only after its
  transaction committed (``synchronous=FULL``: on disk, not only in the OS
  cache), so a SIGKILL, or a power cut, after the answer keeps the task.
* **Nothing runs twice.** A task moves queued -> running in the transaction
  that claims it (``BEGIN IMMEDIATE``: one claimer at a time) and running ->
  done when its last workload's record is stored. After a crash,
  :meth:`Store.recover` puts each task that was running back in the queue
  once (its ``attempts`` count says so) unless all its records had arrived;
  a re-run evaluates only the workloads without a record
  (:meth:`Store.claim` returns what is recorded).
* **No record is written twice.** A record is stored under its (task,
  workload) primary key, then appended to ``results.jsonl``, then marked as
  appended. A crash between the two leaves ``in_jsonl = 0``; recovery appends
  it only if ``(job_id, run_id)`` is not already in the file.
* **A stored answer is one the candidate earned.** An identical submission
  is answered from the store only when every record of the stored task is
  :func:`reusable`: a verdict the trusted side reached on the candidate's own
  code or outputs. A failure the harness, the machine or a neighbouring
  candidate could have caused (a crash, a timeout, a runtime or compile
  error in the worker, HARNESS_ERROR, TOO_LARGE) marks its task
  (``tasks.harness_error``) and the next identical submission is evaluated again.
* **Generator names belong to one client.** The first client to submit
  under a name owns it (``generators``, claimed in the submission's
  transaction); :meth:`Store.submit` refuses the name to every other client.

One connection per thread (SQLite connections must not be shared), WAL mode
so readers never wait for the writer, ``busy_timeout`` so writers queue.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from harness.jsonio import append_jsonl, dumps, loads, read_jsonl
from harness.records import JobResult, Status

SCHEMA = 1
QUEUED, RUNNING, DONE = "queued", "running", "done"
STATES = (QUEUED, RUNNING, DONE)

_DDL = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    key TEXT NOT NULL,
    state TEXT NOT NULL,
    client TEXT NOT NULL,
    spec TEXT NOT NULL,
    workloads TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lane TEXT,
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    harness_error INTEGER NOT NULL DEFAULT 0  -- 1: the task has a record that is not reusable(): never served again
);
CREATE INDEX IF NOT EXISTS tasks_key ON tasks (key, seq);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks (state, seq);
CREATE TABLE IF NOT EXISTS records (
    task_id TEXT NOT NULL,
    workload TEXT NOT NULL,
    job_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    data TEXT NOT NULL,
    in_jsonl INTEGER NOT NULL DEFAULT 0,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (task_id, workload)
);
CREATE INDEX IF NOT EXISTS records_time ON records (recorded_at);
CREATE TABLE IF NOT EXISTS generators (name TEXT PRIMARY KEY, client TEXT NOT NULL, claimed_at REAL NOT NULL);
"""

_STATIC = ("SyntaxError", "UnreadableCandidate", "StaticAntiCheat")
"""Error types of records decided in the planner from the candidate's bytes alone, before any worker ran."""


def reusable(record: JobResult) -> bool:
    """Whether ``record`` may answer a later identical submission (see the module docstring).

    Reusable: PASSED and LOWERED; INCORRECT_* (the trusted checker compared its outputs); REWARD_HACK and
    INVALID_CANDIDATE (the trusted side's evidence or the candidate's own code); and a COMPILE_ERROR decided
    from the bytes alone (a syntax error, an unreadable file). Not reusable: everything that happened inside a
    worker process and could have been caused from outside it (RUNTIME_ERROR, COMPILE_ERROR at import,
    CRASHED, TIMEOUT: a neighbour can re-limit or starve another worker through the OS), and the harness's
    own failures (HARNESS_ERROR, TOO_LARGE).
    """
    if record.status in (Status.PASSED, Status.LOWERED, Status.INCORRECT_SHAPE, Status.INCORRECT_DTYPE,
                         Status.INCORRECT_NUMERICAL, Status.REWARD_HACK, Status.INVALID_CANDIDATE):
        return True
    return record.status is Status.COMPILE_ERROR and record.error is not None and record.error.type in _STATIC


class GeneratorTaken(Exception):
    """A submission names a generator another client owns."""

    def __init__(self, name: str, owner: str, client: str):
        super().__init__(f"generator '{name}' belongs to client '{owner}' (the first to submit under it); client "
                         f"'{client}' cannot file records under it: choose another name (the default is your client "
                         f"name, '{client}')")
        self.name, self.owner, self.client = name, owner, client


class QueueFull(Exception):
    """The queue cannot take the submission now; ``queued`` and ``capacity`` say by how much."""

    def __init__(self, queued: int, wanted: int, capacity: int):
        super().__init__(f"the queue holds {queued} task(s) of {capacity}; {wanted} more do not fit")
        self.queued, self.wanted, self.capacity = queued, wanted, capacity


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task to enqueue (built by the service from a validated submission)."""

    id: str
    key: str
    """Idempotency key: sha256 of what a result depends on (see harness.serve.service.task_key)."""
    client: str
    spec: dict
    """The submission (harness.serve.submission.Submission.to_dict()) plus the resolved problem reference."""
    workloads: tuple[str, ...]
    """The workload names the task must end with a record for."""
    rerun: bool = False


@dataclass(frozen=True, slots=True)
class Task:
    """A task as stored; ``recorded`` lists the workloads that already have a record."""

    seq: int
    id: str
    key: str
    state: str
    client: str
    spec: dict
    workloads: tuple[str, ...]
    attempts: int
    lane: str | None
    submitted_at: float
    """Unix seconds (time.time()) of the submission; likewise started_at / finished_at."""
    started_at: float | None
    finished_at: float | None
    error: str | None = None
    """Why a task is done without a record for every workload (rare: its problem could not be loaded)."""
    recorded: tuple[str, ...] = ()

    @property
    def remaining(self) -> tuple[str, ...]:
        return tuple(w for w in self.workloads if w not in self.recorded)


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :meth:`Store.recover` did after a restart."""

    requeued: tuple[str, ...]
    """Tasks that were running and go back to the queue (each once per restart)."""
    completed: tuple[str, ...]
    """Tasks that were running but had every record: marked done, not re-run."""
    appended: int
    """Stored records that had not reached results.jsonl and were appended now."""


class Store:
    """The queue, the record index and the JSONL results file of one service results folder."""

    def __init__(self, results_dir: str | Path):
        self.results_dir = Path(results_dir)
        self.jsonl = self.results_dir / "results.jsonl"
        self.db_path = self.results_dir / "serve" / "queue.sqlite"
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        con = self._con()
        con.executescript(_DDL)
        row = con.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        if row is None:
            con.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
        elif int(row[0]) != SCHEMA:
            raise RuntimeError(f"{self.db_path}: queue schema {row[0]} != {SCHEMA}; use a new --results folder or "
                               "finish the old queue with the harness version that wrote it")
        self._adopt_rules()

    def _adopt_rules(self) -> None:
        """Apply :func:`reusable` and the generators' owners to a queue written before they existed (once)."""
        def fn(con: sqlite3.Connection) -> None:
            if con.execute("SELECT value FROM meta WHERE name = 'rules'").fetchone() is not None:
                return
            for task_id, data in con.execute("SELECT task_id, data FROM records").fetchall():
                if not reusable(JobResult.from_dict(loads(data))):
                    con.execute("UPDATE tasks SET harness_error = 1 WHERE id = ?", (task_id,))
            for client, spec, at in con.execute("SELECT client, spec, submitted_at FROM tasks ORDER BY seq").fetchall():
                name = loads(spec).get("generator")
                if name is not None:
                    con.execute("INSERT OR IGNORE INTO generators (name, client, claimed_at) VALUES (?, ?, ?)",
                                (name, client, at))
            con.execute("INSERT INTO meta VALUES ('rules', '1')")
        self._tx(fn)

    # ------------------------------------------------------------------ plumbing
    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.db_path, isolation_level=None, timeout=60.0, check_same_thread=True)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("PRAGMA busy_timeout=60000")
            self._local.con = con
        return con

    def _tx(self, fn: Callable[[sqlite3.Connection], object]) -> object:
        con = self._con()
        con.execute("BEGIN IMMEDIATE")
        try:
            out = fn(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        return out

    @staticmethod
    def _task(row: sqlite3.Row | tuple, recorded: Iterable[str] = ()) -> Task:
        seq, tid, key, state, client, spec, wls, attempts, lane, sub, start, fin, err = row
        return Task(seq, tid, key, state, client, loads(spec), tuple(json.loads(wls)), attempts, lane, sub, start, fin,
                    err, tuple(recorded))

    _COLS = "seq, id, key, state, client, spec, workloads, attempts, lane, submitted_at, started_at, finished_at, error"

    def _recorded(self, con: sqlite3.Connection, ids: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {i: [] for i in ids}
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            q = f"SELECT task_id, workload FROM records WHERE task_id IN ({','.join('?' * len(chunk))})"
            for tid, w in con.execute(q, chunk):
                out[tid].append(w)
        return out

    # ------------------------------------------------------------------ submissions
    def submit(self, tasks: Sequence[NewTask], capacity: int) -> list[tuple[str, bool]]:
        """Enqueue ``tasks`` atomically; (task id, deduplicated) per task, in order.

        A task whose key matches a stored task (and that is not a rerun)
        returns that task's id instead of enqueueing (deduplicated = True),
        as does a repeat of a key within the same call. A stored task with a
        record that is not :func:`reusable` is not reused: the submission
        makes a new task. Each task's generator (``spec["generator"]``) is
        claimed for its client; raises :class:`GeneratorTaken` when another
        client owns it, and :class:`QueueFull` when the new tasks would take
        the queue past ``capacity`` (in both cases enqueueing and claiming nothing).
        """
        def fn(con: sqlite3.Connection) -> list[tuple[str, bool]]:
            out: list[tuple[str, bool]] = []
            fresh: list[NewTask] = []
            by_key: dict[str, str] = {}
            now = time.time()
            for t in tasks:
                name = t.spec.get("generator")
                if name is not None:
                    row = con.execute("SELECT client FROM generators WHERE name = ?", (name,)).fetchone()
                    if row is None:
                        con.execute("INSERT INTO generators (name, client, claimed_at) VALUES (?, ?, ?)",
                                    (name, t.client, now))
                    elif row[0] != t.client:
                        raise GeneratorTaken(name, row[0], t.client)
            for t in tasks:
                if not t.rerun:
                    hit = by_key.get(t.key)
                    if hit is None:
                        row = con.execute("SELECT id FROM tasks WHERE key = ? AND harness_error = 0 ORDER BY seq DESC "
                                          "LIMIT 1", (t.key,)).fetchone()
                        hit = row[0] if row else None
                    if hit is not None:
                        out.append((hit, True))
                        by_key[t.key] = hit
                        continue
                fresh.append(t)
                by_key[t.key] = t.id
                out.append((t.id, False))
            if fresh:
                queued = con.execute("SELECT COUNT(*) FROM tasks WHERE state = ?", (QUEUED,)).fetchone()[0]
                if queued + len(fresh) > capacity:
                    raise QueueFull(queued, len(fresh), capacity)
                con.executemany(
                    "INSERT INTO tasks (id, key, state, client, spec, workloads, submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(t.id, t.key, QUEUED, t.client, dumps(t.spec), json.dumps(list(t.workloads)), now) for t in fresh])
            return out
        return self._tx(fn)  # type: ignore[return-value]

    # ------------------------------------------------------------------ the dispatcher's side
    def claim(self, lane: str, limit: int, group_of: Callable[[Task], object], scan: int = 0) -> list[Task]:
        """Move up to ``limit`` queued tasks of one group (the oldest task's) to running for ``lane``.

        ``group_of(task)`` says which tasks can share one engine run (same
        preset and workload selection); tasks of another group stay queued
        in their order. ``scan`` bounds how many queued tasks are looked at
        (default ``4 * limit``). Each claimed task's ``attempts`` goes up by one.
        """
        def fn(con: sqlite3.Connection) -> list[Task]:
            rows = con.execute(f"SELECT {self._COLS} FROM tasks WHERE state = ? ORDER BY seq LIMIT ?",
                               (QUEUED, scan or 4 * limit)).fetchall()
            if not rows:
                return []
            rec = self._recorded(con, [r[1] for r in rows])
            tasks = [self._task(r, rec[r[1]]) for r in rows]
            group = group_of(tasks[0])
            chosen = [t for t in tasks if group_of(t) == group][:limit]
            now = time.time()
            con.executemany("UPDATE tasks SET state = ?, lane = ?, attempts = attempts + 1, started_at = ? WHERE id = ?",
                            [(RUNNING, lane, now, t.id) for t in chosen])
            return [Task(t.seq, t.id, t.key, RUNNING, t.client, t.spec, t.workloads, t.attempts + 1, lane, t.submitted_at,
                         now, None, None, t.recorded) for t in chosen]
        return self._tx(fn)  # type: ignore[return-value]

    def add_record(self, task_id: str, record: JobResult) -> bool:
        """Store ``record`` for ``task_id`` and append it to results.jsonl; False if that workload had one already.

        When the task then has a record for every workload it becomes done.
        """
        data = dumps(record.to_dict())

        def fn(con: sqlite3.Connection) -> bool:
            cur = con.execute("INSERT OR IGNORE INTO records (task_id, workload, job_id, run_id, data, recorded_at) "
                              "VALUES (?, ?, ?, ?, ?, ?)", (task_id, record.workload, record.job_id, record.run_id, data,
                                                            time.time()))
            if cur.rowcount == 1 and not reusable(record):
                con.execute("UPDATE tasks SET harness_error = 1 WHERE id = ?", (task_id,))
            return cur.rowcount == 1
        if not self._tx(fn):
            return False
        append_jsonl(self.jsonl, record.to_dict())
        self._tx(lambda con: con.execute("UPDATE records SET in_jsonl = 1 WHERE task_id = ? AND workload = ?",
                                         (task_id, record.workload)))
        self._finish_if_complete(task_id)
        return True

    def _finish_if_complete(self, task_id: str) -> None:
        def fn(con: sqlite3.Connection) -> None:
            row = con.execute("SELECT workloads, state FROM tasks WHERE id = ?", (task_id,)).fetchone()
            if row is None or row[1] == DONE:
                return
            want = set(json.loads(row[0]))
            have = {w for (w,) in con.execute("SELECT workload FROM records WHERE task_id = ?", (task_id,))}
            if want <= have:
                con.execute("UPDATE tasks SET state = ?, finished_at = ? WHERE id = ?", (DONE, time.time(), task_id))
        self._tx(fn)

    def force_done(self, task_id: str, error: str) -> None:
        """Mark a task done although some workloads have no record, saying why (``error``; never reused)."""
        self._tx(lambda con: con.execute("UPDATE tasks SET state = ?, finished_at = ?, error = ?, harness_error = 1 "
                                         "WHERE id = ? AND state != ?", (DONE, time.time(), error[:2000], task_id, DONE)))

    def tasks_finished_since(self, since: float) -> int:
        """Tasks done since ``since`` (unix seconds): the measured task rate (for Retry-After)."""
        return int(self._con().execute("SELECT COUNT(*) FROM tasks WHERE state = ? AND finished_at >= ?",
                                       (DONE, since)).fetchone()[0])

    # ------------------------------------------------------------------ restart
    def recover(self) -> Recovery:
        """After a restart: append stored records missing from results.jsonl, then re-queue interrupted tasks."""
        con = self._con()
        pending = con.execute("SELECT task_id, workload, job_id, run_id, data FROM records WHERE in_jsonl = 0").fetchall()
        appended = 0
        if pending:
            present = set()
            if self.jsonl.exists():
                present = {(d.get("job_id"), d.get("run_id")) for d in read_jsonl(self.jsonl, on_bad_line=lambda *a: None)}
            for task_id, workload, job_id, run_id, data in pending:
                if (job_id, run_id) not in present:
                    append_jsonl(self.jsonl, loads(data))
                    appended += 1
                self._tx(lambda c: c.execute("UPDATE records SET in_jsonl = 1 WHERE task_id = ? AND workload = ?",
                                             (task_id, workload)))

        def fn(c: sqlite3.Connection) -> tuple[list[str], list[str]]:
            running = c.execute(f"SELECT {self._COLS} FROM tasks WHERE state = ?", (RUNNING,)).fetchall()
            rec = self._recorded(c, [r[1] for r in running])
            requeued, completed = [], []
            now = time.time()
            for r in running:
                t = self._task(r, rec[r[1]])
                if t.remaining:
                    c.execute("UPDATE tasks SET state = ?, lane = NULL WHERE id = ?", (QUEUED, t.id))
                    requeued.append(t.id)
                else:
                    c.execute("UPDATE tasks SET state = ?, finished_at = ? WHERE id = ?", (DONE, now, t.id))
                    completed.append(t.id)
            return requeued, completed
        requeued, completed = self._tx(fn)  # type: ignore[misc]
        return Recovery(tuple(requeued), tuple(completed), appended)

    # ------------------------------------------------------------------ reads
    def get(self, task_ids: Sequence[str]) -> dict[str, Task]:
        """The stored tasks among ``task_ids`` (unknown ids are absent)."""
        con = self._con()
        out: dict[str, Task] = {}
        ids = list(dict.fromkeys(task_ids))
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            rows = con.execute(f"SELECT {self._COLS} FROM tasks WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall()
            rec = self._recorded(con, [r[1] for r in rows])
            out.update({r[1]: self._task(r, rec[r[1]]) for r in rows})
        return out

    def records(self, task_id: str) -> list[JobResult]:
        rows = self._con().execute("SELECT data FROM records WHERE task_id = ? ORDER BY workload", (task_id,)).fetchall()
        return [JobResult.from_dict(loads(d)) for (d,) in rows]

    def counts(self) -> dict[str, int]:
        """Tasks per state (every state present, 0 when none)."""
        got = dict(self._con().execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall())
        return {s: int(got.get(s, 0)) for s in STATES}

    def records_since(self, since: float) -> int:
        """Records stored since ``since`` (unix seconds): the measured evaluation rate."""
        return int(self._con().execute("SELECT COUNT(*) FROM records WHERE recorded_at >= ?", (since,)).fetchone()[0])

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


    def generator_owner(self, name: str) -> str | None:
        """The client that owns generator ``name``, or None when nobody has submitted under it."""
        row = self._con().execute("SELECT client FROM generators WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None


__all__ = ["DONE", "GeneratorTaken", "NewTask", "QUEUED", "QueueFull", "RUNNING", "Recovery", "STATES", "Store", "Task",
           "reusable"]
