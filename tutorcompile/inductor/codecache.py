"""Compile generated source once, keep the result on disk, load it in a few microseconds.

* :func:`cpp_compile` -- C++ source -> a shared library built by the system compiler with
  :data:`CPP_FLAGS`, stored under ``cache_dir()/cpp/<hash>/kernel.so`` where the hash covers
  the source, the flags and the compiler's version. A second compile of the same source finds
  the file and does not run the compiler (``stats["cpp_compiles"]`` counts real runs,
  ``stats["cpp_hits"]`` the reuses). Loaded with ``ctypes`` -- no Python extension build, no
  headers beyond the C++ standard library.
* :func:`cpp_compile_async` -- the same, started on a pool of :func:`compile_workers`
  threads (the compiler is a separate process, so threads build in parallel); it returns a
  future. Two requests for the same source share one build. :func:`wait_for_builds` waits
  for every build started so far and raises the first failure.
* :func:`triton_module` -- Triton source -> an imported module (Triton's ``@jit`` needs the
  source in a real file; Triton keeps its own cache of compiled GPU binaries).

Kernels are built from their *canonical* source (``codegen.common.canonical_source``): the
same layer repeated N times builds one kernel.

The cache directory is ``$TUTORCOMPILE_CACHE_DIR`` or ``~/.cache/tutorcompile``.

Mirrors: torch/_inductor/codecache.py (``CppCodeCache``, ``PyCodeCache``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..environment import probe

CPP_FLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp",
             "-shared", "-fPIC", "-std=c++17"]
"""How every C++ kernel is compiled. Not ``-ffast-math``: it would let the compiler assume
there are no infinities or NaNs (a max-reduction starts at ``-inf``). The vectorised math
library (libmvec) is asked for in the source prelude instead (see ``codegen/cpp.py``)."""

stats = {"cpp_compiles": 0, "cpp_hits": 0, "triton_modules": 0}


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
        if name and shutil.which(name):
            out = subprocess.run([name, "--version"], capture_output=True, text=True)
            return shutil.which(name), out.stdout.splitlines()[0] if out.stdout else name
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


_loaded: dict[str, ctypes.CDLL] = {}
_pending: dict[str, Future] = {}      # key -> the build in progress
_inflight: list[Future] = []          # builds not yet waited for by wait_for_builds
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def cpp_compile(source: str, prelude: str = "") -> tuple[ctypes.CDLL, Path]:
    """Build ``prelude + source`` into a shared library (or find it built) and load it."""
    return cpp_compile_async(source, prelude).result()


def cpp_compile_async(source: str, prelude: str = "") -> Future:
    """Start building ``prelude + source`` (see :func:`cpp_compile`); a future of
    ``(lib, path)``. With GNU g++ the prelude (the headers every kernel includes) is
    compiled once into a precompiled header: parsing ``<cmath>`` and ``<algorithm>`` is
    most of the compiler's work for a small kernel."""
    global _pool
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
        if _pool is None:
            _pool = ThreadPoolExecutor(compile_workers(), thread_name_prefix="tc-cxx")
        future = _pool.submit(_build, source, prelude, key, compiler, version, flags)
        _pending[key] = future
        _inflight[:] = [f for f in _inflight if not f.done() or f.exception() is not None]
        _inflight.append(future)
    return future


def _build(source: str, prelude: str, key: str, compiler: str, version: str,
           flags: list[str]) -> tuple[ctypes.CDLL, Path]:
    folder = cache_dir() / "cpp" / key
    lib_path = folder / "kernel.so"
    try:
        if lib_path.exists():
            with _lock:
                stats["cpp_hits"] += 1
        else:
            folder.mkdir(parents=True, exist_ok=True)
            header = _precompiled_prelude(prelude, compiler, version, flags) if prelude \
                else None
            include = [] if header is None else ["-I", str(header.parent)]
            text = (f'#include "{header.name}"\n' if header else prelude) + source
            (folder / "kernel.cpp").write_text(text)
            (folder / "flags.txt").write_text(f"{compiler} {' '.join(flags)}\n{version}\n")
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
            os.close(fd)
            cmd = [compiler, *flags, *include, str(folder / "kernel.cpp"), "-o", tmp]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                os.unlink(tmp)
                raise RuntimeError(f"C++ compilation failed ({' '.join(cmd)}):\n"
                                   f"{result.stderr}")
            os.replace(tmp, lib_path)  # atomic: a parallel compile of the same key is harmless
            with _lock:
                stats["cpp_compiles"] += 1
        lib = ctypes.CDLL(str(lib_path))
        with _lock:
            _loaded[key] = lib
        return lib, lib_path
    finally:
        with _lock:
            _pending.pop(key, None)


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
            fd, tmp = tempfile.mkstemp(suffix=".gch", dir=folder)
            os.close(fd)
            pch_flags = [f for f in flags if f != "-shared"]
            result = subprocess.run([compiler, *pch_flags, "-x", "c++-header", str(header),
                                     "-o", tmp], capture_output=True, text=True)
            if result.returncode != 0:
                os.unlink(tmp)
                return None
            os.replace(tmp, folder / "prelude.h.gch")
        _headers[key] = header
        return header


def wait_for_builds() -> None:
    """Wait for every C++ build started so far; raise the first one that failed."""
    with _lock:
        futures = list(_inflight)
        _inflight.clear()
    for future in futures:
        future.result()


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
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    _modules[key] = module
    stats["triton_modules"] += 1
    return module
