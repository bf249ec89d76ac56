"""Grading a class: which exercise each submission is, many at a time, in shards, resumable.

* :class:`Exercises` finds the reference notebook of a submission by the exercise id in its
  metadata -- file names do not matter (``alice.ipynb``) -- and the hidden checks
  (``<hidden dir>/<exercise id>.py``). A hidden-check file that matches no exercise, or an
  exercise being graded whose hidden file is missing, is an error before anything runs.
* :func:`grade_class` grades ``jobs`` submissions at a time, each in its own kernel; with a
  ``results`` folder every submission's grade is written as soon as it is known, and a rerun
  reuses the grades whose inputs (submission, reference, hidden checks, limits) are unchanged,
  so an interrupted run resumes where it stopped.
* :func:`shard_of` splits submissions into N stable parts (by a hash of the file name, so a
  submission stays in its shard when others are added); :func:`merge_reports` joins the
  parts' JSON reports into the report an unsharded run would have written.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .grade import NotebookGrade, earlier_notebooks, grade_notebook
from .notebook import exercise_id, read_notebook
from .runner import PACKAGE_DIR


class ConfigurationError(ValueError):
    """The instructor's setup is wrong (a hidden file for no exercise, a missing one, ...)."""


def default_exercise_folders() -> list[Path]:
    """Where shipped exercises are looked for when no ``--reference`` is given."""
    folders = [Path.cwd() / "exercises", PACKAGE_DIR.parent / "exercises"]
    return list(dict.fromkeys(f.resolve() for f in folders if f.is_dir()))


@dataclass
class Exercises:
    """Reference notebooks by exercise id, and the hidden-checks folder."""

    by_id: dict[str, Path]
    single: Path | None = None         # --reference FILE: every submission is graded by it
    hidden: Path | None = None
    explicit: bool = True              # --reference given: an unknown exercise is an error

    @classmethod
    def find(cls, reference: Path | None, hidden: Path | None) -> Exercises:
        single, folders = None, []
        if reference is None:
            folders = default_exercise_folders()
        elif reference.is_dir():
            folders = [reference]
        elif reference.exists():
            single = reference
        else:
            raise ConfigurationError(f"--reference {reference} does not exist")
        by_id: dict[str, Path] = {}
        for nb_path in [p for f in folders for p in sorted(f.glob("*.ipynb"))] + \
                ([single] if single else []):
            try:
                ex = exercise_id(read_notebook(nb_path))
            except ValueError:
                continue
            by_id.setdefault(ex or nb_path.stem, nb_path)
        found = cls(by_id, single, hidden, reference is not None)
        if hidden is not None:
            if not hidden.is_dir():
                raise ConfigurationError(f"--hidden {hidden} is not a folder")
            stray = [p.name for p in sorted(hidden.glob("*.py")) if p.stem not in by_id]
            if stray:
                raise ConfigurationError(
                    f"hidden checks {', '.join(stray)} match no exercise (exercise ids: "
                    f"{', '.join(sorted(by_id)) or 'none found'}); name each file "
                    "<exercise id>.py")
        return found

    def reference_for(self, submission: Path) -> tuple[Path | None, str | None]:
        """(reference notebook, why there is none) for one submission."""
        if self.single is not None:
            return self.single, None
        try:
            ex = exercise_id(read_notebook(submission))
        except ValueError as e:
            if submission.stem in self.by_id:
                return self.by_id[submission.stem], None
            return None, f"{e}; so which exercise it is cannot be told either"
        if ex is None and submission.stem in self.by_id:
            ex = submission.stem          # a notebook from before exercise ids existed
        if ex in self.by_id:
            return self.by_id[ex], None
        if not self.explicit:         # self-grading a notebook of one's own: its own checks
            return None, None
        if ex is None:
            return None, (f"{submission.name} has no exercise id (notebook metadata "
                          "tutorcompile.exercise) and no exercise has its file name")
        return None, f"exercise {ex} was not found among the reference notebooks"

    def hidden_for(self, reference: Path | None) -> Path | None:
        if self.hidden is None or reference is None:
            return None
        ex = next((k for k, v in self.by_id.items() if v == reference), reference.stem)
        return self.hidden / f"{ex}.py"

    def check_hidden(self, references: list[Path]) -> None:
        """Every exercise being graded must have its hidden checks once --hidden is given."""
        hidden = [self.hidden_for(r) for r in references]
        missing = sorted({str(h) for h in hidden if h is not None and not h.exists()})
        if missing:
            raise ConfigurationError("--hidden is given but these hidden-check files are "
                                     f"missing: {', '.join(missing)}")


def shard_of(path: Path, shards: int) -> int:
    """The stable shard (1..shards) of a submission, from its file name only."""
    digest = hashlib.sha256(path.name.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards + 1


def _result_key(submission: Path, reference: Path | None, hidden: Path | None,
                options: dict, answers: list[Path]) -> str:
    h = hashlib.sha256(json.dumps(options, sort_keys=True).encode())
    for p in (submission, reference, hidden, *answers):
        h.update(b"\0" + (p.read_bytes() if p is not None and p.exists() else b""))
    return h.hexdigest()


class Progress:
    """A one-line progress bar on a terminal; one line per submission otherwise."""

    def __init__(self, total: int, stream=None) -> None:
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.lock = threading.Lock()

    def step(self, grade: NotebookGrade, reused: bool) -> None:
        with self.lock:
            self.done += 1
            what = f"{grade.notebook} {grade.earned:g}/{grade.possible:g}" + \
                (" (from an earlier run)" if reused else "")
            if self.tty:
                width = 30
                filled = width * self.done // max(self.total, 1)
                bar = "#" * filled + "." * (width - filled)
                self.stream.write(f"\r[{bar}] {self.done}/{self.total} {what[:60]:<60}")
                if self.done == self.total:
                    self.stream.write("\n")
            else:
                self.stream.write(f"graded {self.done}/{self.total}: {what}\n")
            self.stream.flush()


def _forbidden_paths(files: list[Path]) -> list[Path]:
    """What learner code may not read: the folders holding submissions, references and hidden
    checks, and the repository's solutions/ -- but never a folder that holds the library or
    Python itself (then only the files)."""
    keep_readable = [PACKAGE_DIR.resolve(), Path(sys.prefix).resolve(),
                     Path(sys.base_prefix).resolve()]
    paths = {PACKAGE_DIR.parent.resolve() / "solutions", PACKAGE_DIR.parent.resolve() /
             "exercises"}
    for f in files:
        f = f.resolve()
        folder = f.parent
        inside = any(k == folder or folder in k.parents for k in keep_readable)
        paths.add(f if inside else folder)
    return sorted(paths)


def grade_class(submissions: list[Path], exercises: Exercises, *, jobs: int = 1,
                cell_timeout: float = 120, memory_limit: int | None = None,
                sandbox: str | None = None, results: Path | None = None,
                progress: Progress | None = None) -> list[NotebookGrade]:
    """Grade every submission (``jobs`` at a time); grades sorted by notebook name."""
    plans = []
    for sub in submissions:
        reference, why = exercises.reference_for(sub)
        plans.append((sub, reference, why, exercises.hidden_for(reference)))
    exercises.check_hidden([r for _, r, _, _ in plans if r is not None])
    forbidden = _forbidden_paths([p for sub, ref, _, hid in plans for p in (sub, ref, hid)
                                  if p is not None])
    options = {"cell_timeout": cell_timeout, "memory_limit": memory_limit,
               "sandbox": sandbox}
    if results is not None:
        results.mkdir(parents=True, exist_ok=True)

    def one(sub: Path, reference: Path | None, why: str | None, hidden: Path | None
            ) -> tuple[NotebookGrade, bool]:
        answers = earlier_notebooks(sub)
        key = _result_key(sub, reference, hidden, options, answers)
        saved = results / f"{sub.name}.json" if results is not None else None
        if saved is not None and saved.exists():
            try:
                data = json.loads(saved.read_text())
                if data.get("key") == key:
                    return NotebookGrade.from_json(data["grade"]), True
            except (ValueError, KeyError, TypeError):
                pass                      # a half-written file from an interrupted run
        if why is not None:
            grade = NotebookGrade(sub.name, error=why)
        else:
            grade = grade_notebook(sub, reference, hidden, cell_timeout, memory_limit,
                                   sandbox, forbidden, answers)
        if saved is not None:
            tmp = saved.with_suffix(".json.tmp")
            tmp.write_text(json.dumps({"key": key, "grade": grade.to_json()}, indent=1,
                                      sort_keys=True) + "\n")
            os.replace(tmp, saved)
        return grade, False

    grades = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, *plan) for plan in plans]
        for future in as_completed(futures):
            grade, reused = future.result()
            grades.append(grade)
            if progress is not None:
                progress.step(grade, reused)
    return sorted(grades, key=lambda g: g.notebook)


def report_rows(grades: list[NotebookGrade]) -> list[dict]:
    return [g.to_json() for g in sorted(grades, key=lambda g: g.notebook)]


def write_reports(grades: list[NotebookGrade], csv_path: Path | None,
                  json_path: Path | None) -> None:
    grades = sorted(grades, key=lambda g: g.notebook)
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["notebook", "task", "earned", "possible", "passed", "message"])
            for g in grades:
                for task, row in g.tasks().items():
                    writer.writerow([g.notebook, task, row["earned"], row["possible"],
                                     row["passed"], row["message"]])
                if g.error:
                    writer.writerow([g.notebook, "", 0, g.possible, False, g.error])
    if json_path:
        json_path.write_text(json.dumps(report_rows(grades), indent=2, sort_keys=True) + "\n")


def merge_reports(paths: list[Path]) -> list[NotebookGrade]:
    """The grades in several JSON reports (shards), as one list; a notebook twice is an error."""
    grades: dict[str, NotebookGrade] = {}
    for path in paths:
        for row in json.loads(path.read_text()):
            if row["notebook"] in grades:
                raise ConfigurationError(f"{row['notebook']} is in more than one report "
                                         f"(again in {path})")
            grades[row["notebook"]] = NotebookGrade.from_json(row)
    return sorted(grades.values(), key=lambda g: g.notebook)
