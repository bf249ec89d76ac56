"""Running one submission's cells in a grading kernel (``worker.py``) and reading the verdicts.

:func:`run_cells` starts the kernel in a fresh scratch folder -- optionally inside bubblewrap
(``sandbox="bwrap"``) -- streams it the cells one at a time, and enforces the limits from
outside: a cell that runs past ``cell_timeout`` is interrupted (SIGINT) and, if it does not
stop within a few seconds, the kernel is killed and the remaining cells are reported as not
run; ``memory_limit`` caps the kernel's data memory (RLIMIT_DATA). A kernel that dies is
reported with its exit code or signal. Result lines that do not carry the nonce sent to the
kernel before any learner code ran are reported as forged.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .notebook import read_notebook

PACKAGE_DIR = Path(__file__).resolve().parent.parent          # tutorcompile/
STARTUP_TIMEOUT = 180
GRACE = 10.0   # after SIGINT, before SIGKILL: paid only by a cell that ignores the interrupt
               # (a loaded machine can take seconds to deliver one that is obeyed)


@dataclass(frozen=True)
class Cell:
    role: str            # "learner" (the submission's code), "given" or "check" (the exercise's)
    source: str
    label: str           # how reports name it, e.g. "cell 3 (task t1)"


@dataclass
class CellResult:
    index: int
    passed: bool
    message: str = ""
    problems: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)


@dataclass
class RunOutcome:
    results: dict[int, CellResult]
    error: str | None = None
    isolation: str = ""
    forged: int = 0


def parse_size(text: str | None) -> int | None:
    """``2G``, ``512M``, ``1.5G`` or a byte count; None stays None."""
    if text is None:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def available_sandbox() -> str | None:
    """The sandbox ``--sandbox`` would use here, or None: bubblewrap, if it runs."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid",
                            "true"], capture_output=True)
    return "bwrap" if probe.returncode == 0 else None


def _runtime_paths() -> list[str]:
    """What a grading kernel needs to start: the interpreter's prefixes (a virtual
    environment's included) and the folder this package is imported from."""
    return sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                 PACKAGE_DIR.parent)})


def _last_words(log: Path) -> str:
    """The kernel's last line of output, which usually says why it died."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return f" (its last output: {lines[-1][:200]})" if lines else ""


def _describe_exit(returncode: int, memory_limit: int | None) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (out of memory?)" if -returncode == signal.SIGKILL else ""
        return f"the kernel died: killed by {name}{hint}"
    limit = f" (memory limit {memory_limit >> 20} MiB)" if memory_limit else ""
    return f"the kernel exited with code {returncode}" + (limit if returncode == 137 else "")


class _Kernel:
    def __init__(self, cells_forbidden: list[Path], memory_limit: int | None,
                 sandbox: str | None, scratch: Path, log: Path, preload: list[str]) -> None:
        self.nonce = secrets.token_hex(16)
        ctrl_r, self.ctrl_w = os.pipe()
        self.res_r, res_w = os.pipe()
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
                   MPLBACKEND="Agg", HOME=str(scratch), TMPDIR=str(scratch / "tmp"),
                   TUTORCOMPILE_ANSWERS=str(scratch / "answers"),   # see answers.py
                   PYTHONPATH=os.pathsep.join([str(PACKAGE_DIR.parent)] + [
                       p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        (scratch / "tmp").mkdir()
        # the file itself, not ``-m``: importing the package would import torch first
        cmd = [sys.executable, str(Path(__file__).with_name("worker.py")), str(ctrl_r),
               str(res_w)]
        forbidden = [str(p.resolve()) for p in cells_forbidden if p.exists()]
        if sandbox == "bwrap":
            wrap = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                    "--tmpfs", "/tmp"]
            for path in _runtime_paths():   # a clone or venv under /tmp: shown again, read-only
                if Path(path).is_relative_to("/tmp"):
                    wrap += ["--ro-bind", path, path]
            for path in forbidden:
                if Path(path).is_dir():
                    wrap += ["--tmpfs", path]
                else:
                    wrap += ["--ro-bind", "/dev/null", path]
            wrap += ["--bind", str(scratch), str(scratch), "--unshare-pid", "--unshare-net",
                     "--unshare-ipc", "--die-with-parent", "--chdir",
                     str(scratch)]
            cmd = wrap + cmd
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     pass_fds=(ctrl_r, res_w), start_new_session=True)
        os.close(ctrl_r)
        os.close(res_w)
        self.buffer = b""
        self.forged = 0
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.res_r, selectors.EVENT_READ)
        self.send({"nonce": self.nonce, "preload": preload, "library_dirs": [str(PACKAGE_DIR)],
                   "forbidden": forbidden, "cwd": str(scratch), "memory_limit": memory_limit})

    def send(self, message: dict | str) -> bool:
        """The first message is JSON; cells go as hex fields, which the kernel decodes with
        bytes methods alone (its json module is the submission's to break)."""
        line = json.dumps(message) if isinstance(message, dict) else message
        try:
            os.write(self.ctrl_w, (line + "\n").encode())
            return True
        except (BrokenPipeError, OSError):
            return False

    def send_cell(self, index: int, cell: Cell) -> bool:
        return self.send(" ".join([str(index)] + [text.encode().hex() for text in
                                                  (cell.role, cell.label, cell.source)]))

    def receive(self, timeout: float) -> tuple[str, int, str, dict] | None | str:
        """The next genuine result line; None on timeout; "eof" when the kernel is gone."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                parts = line.decode(errors="replace").split(" ", 4)
                if len(parts) == 5 and parts[0] == self.nonce:
                    try:
                        return parts[1], int(parts[2]), parts[3], json.loads(parts[4])
                    except ValueError:
                        pass
                self.forged += 1
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not self.selector.select(left):
                return None
            chunk = os.read(self.res_r, 1 << 16)
            if not chunk:
                return "eof"
            self.buffer += chunk

    def close(self) -> int:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        returncode = self.proc.wait()
        for fd in (self.ctrl_w, self.res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.selector.close()
        self.log.close()
        return returncode


# CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state, so two
# threads parsing at once can fail with "SystemError: AST constructor recursion depth
# mismatch" (python/cpython#106905); a class is graded on a thread pool.
_AST_LOCK = threading.Lock()


def preload_of(cells: list[Cell]) -> list[str]:
    """The modules the exercise's own cells import: imported (and snapshotted) before any
    learner code runs, so the pristine copies are the real ones."""
    names: set[str] = set()
    for cell in cells:
        if cell.role == "learner":
            continue
        try:
            with _AST_LOCK:
                tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return sorted(names)


def _answer_cells(answers: Sequence[Path]) -> list[Cell]:
    """The given and check cells of the learner's earlier notebooks: ``answers.earlier`` runs
    them in the kernel, so what they import is preloaded like the exercise's own imports."""
    cells = []
    for path in answers:
        try:
            nb = read_notebook(path)
        except ValueError:
            continue
        cells += [Cell("given", c.source, str(path)) for c in nb.cells if c.cell_type == "code"
                  and c.metadata.get("tutorcompile", {}).get("role") not in ("task", "demo")]
    return cells


def run_cells(cells: list[Cell], cell_timeout: float = 120, memory_limit: int | None = None,
              sandbox: str | None = None, forbidden: Sequence[Path] = (),
              answers: Sequence[Path] = ()) -> RunOutcome:
    """Run ``cells`` in a fresh grading kernel; results keyed by position in ``cells``.

    ``answers`` are the learner's notebooks of earlier exercises: copied into the scratch
    folder's ``answers/``, where ``answers.earlier`` finds them (and only them)."""
    isolation = ("bubblewrap sandbox (read-only system, instructor folders hidden, no network, "
                 "own process namespace) + " if sandbox == "bwrap" else "") + \
        "separate kernel process in a scratch folder + audit hook + integrity checks"
    outcome = RunOutcome({}, isolation=isolation)
    with tempfile.TemporaryDirectory(prefix="tutorcompile-grade-") as tmp:
        scratch = Path(tmp) / "work"
        scratch.mkdir()
        (scratch / "answers").mkdir()
        for path in answers:
            shutil.copyfile(path, scratch / "answers" / Path(path).name)
        kernel = _Kernel(list(forbidden), memory_limit, sandbox, scratch, Path(tmp) / "log",
                         preload_of(cells + _answer_cells(answers)))
        try:
            ready = kernel.receive(STARTUP_TIMEOUT)
            if not isinstance(ready, tuple):
                rc = kernel.close()
                outcome.error = ("the grading kernel did not start: " +
                                 (_describe_exit(rc, memory_limit) if ready == "eof"
                                  else "no answer") + _last_words(Path(tmp) / "log"))
                return outcome
            for index, cell in enumerate(cells):
                reply: tuple | str | None = "eof"
                if kernel.send_cell(index, cell):
                    reply = kernel.receive(cell_timeout)
                if reply is None:                       # past the limit: interrupt it
                    try:
                        os.killpg(kernel.proc.pid, signal.SIGINT)
                    except ProcessLookupError:
                        pass
                    reply = kernel.receive(GRACE)
                    timeout = f"Timeout of {cell_timeout:g} seconds exceeded in {cell.label}"
                    if isinstance(reply, tuple):
                        outcome.results[index] = CellResult(index, False, timeout)
                        continue
                    kernel.close()
                    outcome.error = (f"{timeout}, and the cell did not stop when interrupted: "
                                     "the kernel was killed; later cells did not run")
                    outcome.results[index] = CellResult(index, False, outcome.error)
                    break
                if reply == "eof":
                    rc = kernel.close()
                    outcome.error = f"{_describe_exit(rc, memory_limit)} in {cell.label}; " \
                        "later cells did not run" + _last_words(Path(tmp) / "log")
                    break
                assert isinstance(reply, tuple)   # (a verdict: neither eof nor a timeout)
                kind, _, status, payload = reply
                message = payload.get("message", "")
                if memory_limit and ("MemoryError" in message
                                     or "can't allocate memory" in message):
                    message = f"memory limit ({memory_limit / (1 << 30):g} GiB) hit: {message}"
                outcome.results[index] = CellResult(
                    index, status in ("ok", "passed"), message, payload.get("problems", []),
                    [what for _, what in payload.get("denied", [])],
                    payload.get("restored", []))
        finally:
            kernel.close()
            outcome.forged = kernel.forged
    return outcome
