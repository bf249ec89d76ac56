"""Compile generated source once, keep the result on disk, load it in a few microseconds.

* :func:`cpp_compile` -- C++ source -> a shared library built by the system compiler with
  :data:`CPP_FLAGS`, stored under ``cache_dir()/cpp/<hash>/kernel.so`` where the hash covers
  the source, the flags and the compiler's version. A second compile of the same source finds
  the file and does not run the compiler (``stats["cpp_compiles"]`` counts real runs,
  ``stats["cpp_hits"]`` the reuses). Loaded with ``ctypes`` -- no Python extension build, no
  headers beyond the C++ standard library.
* :func:`triton_module` -- Triton source -> an imported module (Triton's ``@jit`` needs the
  source in a real file; Triton keeps its own cache of compiled GPU binaries).

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


_loaded: dict[str, ctypes.CDLL] = {}


def cpp_compile(source: str) -> tuple[ctypes.CDLL, Path]:
    """Build ``source`` into a shared library (or find it built) and load it."""
    compiler, version = cxx_compiler()
    flags = cpp_flags()
    key = source_hash(source, " ".join(flags) + version)
    if key in _loaded:
        stats["cpp_hits"] += 1
        return _loaded[key], cache_dir() / "cpp" / key / "kernel.so"
    folder = cache_dir() / "cpp" / key
    lib_path = folder / "kernel.so"
    if lib_path.exists():
        stats["cpp_hits"] += 1
    else:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "kernel.cpp").write_text(source)
        (folder / "flags.txt").write_text(f"{compiler} {' '.join(flags)}\n{version}\n")
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
        os.close(fd)
        cmd = [compiler, *flags, str(folder / "kernel.cpp"), "-o", tmp]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            os.unlink(tmp)
            raise RuntimeError(f"C++ compilation failed ({' '.join(cmd)}):\n{result.stderr}")
        os.replace(tmp, lib_path)  # atomic: a parallel compile of the same key is harmless
        stats["cpp_compiles"] += 1
    lib = ctypes.CDLL(str(lib_path))
    _loaded[key] = lib
    return lib, lib_path


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
