"""Compile generated source once, keep the result on disk, load it in a few microseconds.

(The last two of the compiler's caches, ``compiled_graphs`` and the kernel files: their keys
beside the others' in ``tutorcompile/_caches.py``.)

* :func:`cpp_compile` -- C++ source -> a shared library built by the system compiler with
  :data:`CPP_FLAGS`, stored under ``cache_dir()/cpp/<hash>/kernel.so`` where the hash covers
  the source, the flags and the compiler's version. A second compile of the same source finds
  the file and does not run the compiler. Loaded with ``ctypes`` -- no Python extension
  build, no headers beyond the C++ standard library.
* :func:`cpp_compile_async` -- the same, started on a pool of :func:`compile_workers`
  threads (the compiler is a separate process, so threads build in parallel); it returns a
  future. Two requests for the same source share one build.
* :func:`cpp_kernel_async` -- a generated kernel (a function called ``kernel``): a future of
  the loaded function. Kernels requested inside a :func:`batched_builds` block -- the
  kernels of one graph -- are compiled *together*, a few translation units of many
  kernels each, one per pool thread: each compiler run pays once for starting up and
  loading the precompiled prelude, which is most of the work for a small kernel (20 small
  kernels: 3.8 s one by one, 0.9 s in one run). Each kernel is still content-addressed:
  ``cpp/<hash>/kernel.so`` links to the library it was built in, where it is called
  ``kernel_<hash>``, so a kernel another graph (or an earlier process) built is reused and
  only new kernels are compiled. A block's builds wait in a queue by ``priority``: the
  kernels of a graph about to run go before those of a backward that meanwhile runs
  through PyTorch (``compile_fx.BUILDS``).
* :func:`triton_module` -- Triton source -> an imported module (Triton's ``@jit`` needs the
  source in a real file; Triton keeps its own cache of compiled GPU binaries).
* :data:`compiled_graphs` and :func:`graph_key` -- whole compiled graphs, in memory. A
  model whose capture breaks into many graphs repeats itself: a U-Net's blocks at one
  resolution are the same graph with other weights (weights are graph inputs), and its
  39 graphs have 36 distinct forwards and backwards among 78. The key is the graph's
  content -- not its node names, nor the user's source lines they cite -- and the
  compilation is shared while something still runs it.

``stats`` counts kernels compiled (``cpp_compiles``), compiler runs (``cpp_runs``: fewer,
when kernels share a run), kernel reuses (``cpp_hits``: built before, on disk or in this
process) and compiled graphs reused (``graph_hits``).

Kernels are built from their *canonical* source (``codegen.common.canonical_source``): the
same layer repeated N times, or in N graphs, builds one kernel.

The cache directory is ``$TUTORCOMPILE_CACHE_DIR`` or ``~/.cache/tutorcompile``.

Mirrors: torch/_inductor/codecache.py (``CppCodeCache``, ``PyCodeCache``,
``FxGraphCache``) and torch/_inductor/async_compile.py (``AsyncCompile``: kernels built on a
pool while the graph is still being compiled).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import heapq
import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from .._caches import on_reset
from ..environment import probe
from ..fx import Graph, Node
from ..fx.codegen import literal
from . import config

CPP_FLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp",
             "-shared", "-fPIC", "-std=c++17"]
"""How every C++ kernel is compiled. Not ``-ffast-math``: it would let the compiler assume
there are no infinities or NaNs (a max-reduction starts at ``-inf``). The vectorised math
library (libmvec) is asked for in the source prelude instead (see ``codegen/cpp.py``)."""

stats = {"cpp_compiles": 0, "cpp_runs": 0, "cpp_hits": 0, "triton_modules": 0,
         "graph_hits": 0}


def cache_dir() -> Path:
    root = os.environ.get("TUTORCOMPILE_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "tutorcompile")
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home (some CI machines): use the temporary directory
        path = Path(tempfile.gettempdir()) / "tutorcompile-cache"
        path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def cxx_compiler() -> tuple[str, str]:
    """(path, version line) of the C++ compiler, or raise if there is none."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name:
            path = shutil.which(name)
            if path is None:
                continue
            out = subprocess.run([name, "--version"], capture_output=True, text=True)
            return path, out.stdout.splitlines()[0] if out.stdout else name
    raise RuntimeError("no C++ compiler found (install g++ or set $CXX)")


def cpp_flags() -> list[str]:
    flags = list(CPP_FLAGS)
    if not probe().has_openmp:
        flags.remove("-fopenmp")  # pragmas are then ignored: one thread, still correct
    return flags


def source_hash(source: str, extra: str = "") -> str:
    return hashlib.sha256((source + "\0" + extra).encode()).hexdigest()[:24]


def compile_workers() -> int:
    """Parallel C++ builds: ``$TUTORCOMPILE_COMPILE_THREADS`` or one per CPU core."""
    return int(os.environ.get("TUTORCOMPILE_COMPILE_THREADS") or os.cpu_count() or 1)


# ---------------------------------------------------------------------------------------
# The build pool: most urgent first
# ---------------------------------------------------------------------------------------

_loaded: dict[str, ctypes.CDLL] = {}  # key -> its library, loaded
_pending: dict[str, Future] = {}      # key -> the build in progress
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_queue: list[tuple[int, int, Callable[[], None]]] = []   # (priority, order, job): a heap
_order = itertools.count()


def _start(job: Callable[[], None], priority: int = 0) -> None:
    """Run ``job`` on the pool once every queued job of a lower ``priority`` (and every
    earlier one of the same) has started. Each pool task runs the most urgent job queued
    when a thread takes it: builds that can wait never delay a graph about to run."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(compile_workers(), thread_name_prefix="tc-cxx")
        heapq.heappush(_queue, (priority, next(_order), job))
        pool = _pool
    pool.submit(_run_most_urgent)


def _run_most_urgent() -> None:
    with _lock:
        _, _, job = heapq.heappop(_queue)
    job()


def _run_compiler(cmd: list[str], output: Path) -> None:
    """Run ``cmd`` writing to a temporary file, then move it to ``output`` (atomic: a
    parallel build of the same file is harmless); raise with the compiler's message."""
    fd, tmp = tempfile.mkstemp(suffix=output.suffix, dir=output.parent)
    os.close(fd)
    result = subprocess.run([*cmd, "-o", tmp], capture_output=True, text=True)
    if result.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"C++ compilation failed ({' '.join(cmd)}):\n{result.stderr}")
    os.replace(tmp, output)


def _load(path: Path) -> ctypes.CDLL:
    """The library at ``path`` (a link to a shared library is loaded once per target)."""
    return _libraries_loaded(os.path.realpath(path))


@functools.cache
def _libraries_loaded(real_path: str) -> ctypes.CDLL:
    return ctypes.CDLL(real_path)


# ---------------------------------------------------------------------------------------
# One source, one library
# ---------------------------------------------------------------------------------------

def cpp_compile(source: str, prelude: str = "") -> tuple[ctypes.CDLL, Path]:
    """Build ``prelude + source`` into a shared library (or find it built) and load it."""
    return cpp_compile_async(source, prelude).result()


def cpp_compile_async(source: str, prelude: str = "") -> Future:
    """Start building ``prelude + source`` (see :func:`cpp_compile`); a future of
    ``(lib, path)``. With GNU g++ the prelude (the headers every kernel includes) is
    compiled once into a precompiled header: parsing ``<cmath>`` and ``<algorithm>`` is
    most of the compiler's work for a small kernel."""
    compiler, version = cxx_compiler()
    flags = cpp_flags()
    key = source_hash(prelude + source, " ".join(flags) + version)
    with _lock:
        if key in _loaded:
            stats["cpp_hits"] += 1
            done: Future = Future()
            done.set_result((_loaded[key], cache_dir() / "cpp" / key / "kernel.so"))
            return done
        if key in _pending:                  # the same kernel elsewhere in the graph
            stats["cpp_hits"] += 1
            return _pending[key]
        future = _pending[key] = Future()

    def build() -> None:
        try:
            future.set_result(_build(source, prelude, key, compiler, version, flags))
        except BaseException as e:  # the waiter raises it
            future.set_exception(e)
        finally:
            with _lock:
                _pending.pop(key, None)
    _start(build)
    return future


def _build(source: str, prelude: str, key: str, compiler: str, version: str,
           flags: list[str]) -> tuple[ctypes.CDLL, Path]:
    folder = cache_dir() / "cpp" / key
    lib_path = folder / "kernel.so"
    if lib_path.exists():
        with _lock:
            stats["cpp_hits"] += 1
    else:
        folder.mkdir(parents=True, exist_ok=True)
        include, text = _with_prelude(prelude, compiler, version, flags)
        (folder / "kernel.cpp").write_text(text + source)
        (folder / "flags.txt").write_text(f"{compiler} {' '.join(flags)}\n{version}\n")
        _run_compiler([compiler, *flags, *include, str(folder / "kernel.cpp")], lib_path)
        with _lock:
            stats["cpp_compiles"] += 1
            stats["cpp_runs"] += 1
    lib = _load(lib_path)
    with _lock:
        _loaded[key] = lib
    return lib, lib_path


def _with_prelude(prelude: str, compiler: str, version: str, flags: list[str]
                  ) -> tuple[list[str], str]:
    """(include flags, text that starts a translation unit) for ``prelude``: an include of
    its precompiled header where there is one, else the prelude itself."""
    header = _precompiled_prelude(prelude, compiler, version, flags) if prelude else None
    if header is None:
        return [], prelude
    return ["-I", str(header.parent)], f'#include "{header.name}"\n'


_headers: dict[str, Path | None] = {}


def _precompiled_prelude(prelude: str, compiler: str, version: str, flags: list[str]
                         ) -> Path | None:
    """``prelude.h`` next to its precompiled ``prelude.h.gch`` (built once per prelude,
    flags and compiler); None where that is not possible (not GNU g++, or it failed) --
    the kernel then includes the prelude as text. g++ checks that a ``.gch`` matches the
    flags of the compile that uses it and ignores it otherwise."""
    key = source_hash(prelude, " ".join(flags) + version)
    with _lock:
        if key in _headers:
            return _headers[key]
        _headers[key] = None
        if "g++" not in os.path.basename(compiler) or "clang" in version.lower():
            return None
        folder = cache_dir() / "cpp" / f"prelude-{key}"
        header = folder / "prelude.h"
        if not (folder / "prelude.h.gch").exists():
            folder.mkdir(parents=True, exist_ok=True)
            header.write_text(prelude)
            pch_flags = [f for f in flags if f != "-shared"]
            try:
                _run_compiler([compiler, *pch_flags, "-x", "c++-header", str(header)],
                              folder / "prelude.h.gch")
            except RuntimeError:
                return None
        _headers[key] = header
        return header


# ---------------------------------------------------------------------------------------
# Generated kernels: a graph's kernels built together
# ---------------------------------------------------------------------------------------

class _Kernel:
    def __init__(self, key: str, source: str, prelude: str, future: Future):
        self.key, self.source, self.prelude, self.future = key, source, prelude, future
        self.symbol = f"kernel_{key}"


class _Batch:
    """The new kernels requested inside one :func:`batched_builds` block."""

    def __init__(self, priority: int):
        self.priority = priority
        self.kernels: list[_Kernel] = []
        self.submitted = False

    def submit(self) -> None:
        """Send the kernels to the pool, in runs of at least ``config.kernels_per_run``
        (once; later calls do nothing)."""
        with _lock:
            if self.submitted:
                return
            self.submitted = True
        by_prelude: dict[str, list[_Kernel]] = {}
        for kernel in self.kernels:
            by_prelude.setdefault(kernel.prelude, []).append(kernel)
        for kernels in by_prelude.values():
            runs = max(1, min(compile_workers(), len(kernels) // config.kernels_per_run))
            for i in range(runs):
                run = kernels[i * len(kernels) // runs:(i + 1) * len(kernels) // runs]
                _start(functools.partial(_build_kernels, run), self.priority)


class _QueuedKernel(Future):
    """A kernel waiting in a batch that is not submitted yet: asking for its result submits
    the batch first (autotuning times a kernel while its graph is still being generated)."""

    def __init__(self, batch: _Batch):
        super().__init__()
        self.batch = batch

    def result(self, timeout: float | None = None):
        self.batch.submit()
        return super().result(timeout)


_open_batches = threading.local()   # .stack: the batched_builds blocks open in this thread


@contextlib.contextmanager
def batched_builds(priority: int = 0) -> Iterator[None]:
    """Build the kernels :func:`cpp_kernel_async` is asked for inside the block together,
    when the block ends (a graph's code generation), queued at ``priority`` (lower goes
    first)."""
    if not hasattr(_open_batches, "stack"):
        _open_batches.stack = []
    batch = _Batch(priority)
    _open_batches.stack.append(batch)
    try:
        yield
    finally:
        _open_batches.stack.pop()
        batch.submit()


def cpp_kernel_async(source: str, prelude: str = "") -> Future:
    """Start building a generated kernel: ``source`` defines one function called
    ``kernel`` (its canonical text), ``prelude`` what it includes. A future of the loaded
    function. Inside :func:`batched_builds` the build waits for the end of the block and
    shares compiler runs with the block's other kernels; outside, it starts at once."""
    compiler, version = cxx_compiler()
    flags = cpp_flags()
    key = source_hash(prelude + source, " ".join(flags) + version + "\0as kernel_<key>")
    with _lock:
        if key in _loaded:
            stats["cpp_hits"] += 1
            done: Future = Future()
            done.set_result(getattr(_loaded[key], f"kernel_{key}"))
            return done
        if key in _pending:                  # requested before (this graph, or another)
            stats["cpp_hits"] += 1
            return _pending[key]
        stack = getattr(_open_batches, "stack", None)
        batch = stack[-1] if stack and not stack[-1].submitted else None
        future = _pending[key] = Future() if batch is None else _QueuedKernel(batch)
    kernel = _Kernel(key, source, prelude, future)
    if batch is None:
        _start(functools.partial(_build_kernels, [kernel]))
    else:
        batch.kernels.append(kernel)
    return future


def _build_kernels(kernels: list[_Kernel]) -> None:
    """One compiler run for the kernels not on disk yet, into
    ``cpp/kernels-<hash>/kernels.so``; each kernel's ``cpp/<key>/kernel.so`` links to it
    (its ``kernel.cpp`` is its part of the run's source). Then load and resolve them all."""
    try:
        root = cache_dir() / "cpp"
        missing = [k for k in kernels if not (root / k.key / "kernel.so").exists()]
        if missing:
            compiler, version = cxx_compiler()
            flags = cpp_flags()
            include, start = _with_prelude(missing[0].prelude, compiler, version, flags)
            folder = root / f"kernels-{source_hash(' '.join(k.key for k in missing))}"
            folder.mkdir(parents=True, exist_ok=True)
            parts = {k: f"#define kernel {k.symbol}\n{k.source}\n#undef kernel\n"
                     for k in missing}
            (folder / "kernels.cpp").write_text(start + "".join(parts.values()))
            _run_compiler([compiler, *flags, *include, str(folder / "kernels.cpp")],
                          folder / "kernels.so")
            for k, part in parts.items():
                own = root / k.key
                own.mkdir(parents=True, exist_ok=True)
                (own / "kernel.cpp").write_text(start + part)
                (own / "flags.txt").write_text(f"{compiler} {' '.join(flags)}\n{version}\n")
                link = own / f"kernel.so.{os.getpid()}.{threading.get_ident()}"
                os.symlink(os.path.relpath(folder / "kernels.so", own), link)
                os.replace(link, own / "kernel.so")
        with _lock:
            stats["cpp_compiles"] += len(missing)
            stats["cpp_runs"] += bool(missing)
            stats["cpp_hits"] += len(kernels) - len(missing)
        for k in kernels:
            lib = _load(root / k.key / "kernel.so")
            with _lock:
                _loaded[k.key] = lib
            k.future.set_result(getattr(lib, k.symbol))
    except BaseException as e:  # each waiter raises it
        for k in kernels:
            if not k.future.done():
                k.future.set_exception(e)
    finally:
        with _lock:
            for k in kernels:
                _pending.pop(k.key, None)


_modules: dict[str, object] = {}


def triton_module(source: str, name: str):
    """Write ``source`` to the cache and import it (once per process)."""
    key = source_hash(source)
    if key in _modules:
        return _modules[key]
    folder = cache_dir() / "triton"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}_{key}.py"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(suffix=".py", dir=folder)
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    module_name = f"tutorcompile_triton_{name}_{key}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None   # (a .py file we just wrote)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    _modules[key] = module
    stats["triton_modules"] += 1
    return module


# ---------------------------------------------------------------------------------------
# Compiled graphs
# ---------------------------------------------------------------------------------------

compiled_graphs: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
""":func:`graph_key` -> a compiled graph, for as long as something holds it."""
on_reset(compiled_graphs.clear)  # tutorcompile.reset() compiles from the start again


def graph_key(graph: Graph, example_inputs: Sequence[Any], options: Sequence[Any]
              ) -> str | None:
    """A hash of everything compiling ``graph`` for ``example_inputs`` with ``options``
    depends on: each node's op, target and arguments (graph nodes by position, constants
    by value, tensors by contents, other objects by identity -- the graph compiled under
    this key keeps them alive, so no other object takes their ``id``), its tensor
    metadata, and the example inputs' sizes, strides, dtypes and devices. Not the node
    names nor their ``source`` lines: they change the generated code's comments, not what
    it computes. None for a graph with nodes other than inputs, function calls and the
    output."""
    position: dict[Node, int] = {}

    def spell(value: Any) -> str:
        if isinstance(value, Node):
            return f"%{position[value]}"
        if isinstance(value, torch.Tensor):
            return _tensor_digest(value)
        text = literal(value, spell)
        return text if text is not None else f"<{type(value).__qualname__} {id(value):#x}>"

    parts = [spell(tuple(options))]
    for x in example_inputs:
        parts.append(repr((x.shape, x.stride(), x.dtype, x.device))
                     if isinstance(x, torch.Tensor) else spell(x))
    for node in graph.nodes:
        if node.op not in ("placeholder", "call_function", "output"):
            return None
        position[node] = len(position)
        target = "" if node.op == "placeholder" else spell(node.target)
        parts.append(f"{node.op} {target} {spell(node.args)} {spell(node.kwargs)} "
                     f"{node.meta.get('tensor_meta')!r} {node.meta.get('sym')!r}")
    return source_hash("\n".join(parts))


def _tensor_digest(t: torch.Tensor) -> str:
    """A tensor constant by its contents (by identity if they cannot be read as bytes)."""
    try:
        data = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    except (RuntimeError, TypeError):   # not strided, a meta tensor, ...
        return f"<tensor {id(t):#x}>"
    return f"tensor({t.dtype}, {tuple(t.shape)}, {hashlib.sha256(data).hexdigest()})"
