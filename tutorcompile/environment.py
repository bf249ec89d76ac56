"""What this machine has, and therefore what each stage of the course will run on.

``tutorcompile.doctor()`` (or ``python -m tutorcompile doctor``) prints a report like::

    tutorcompile 0.1.0 on Linux x86_64, Python 3.11.7
      torch          2.13.0+cpu
      CUDA           not available (no GPU or a CPU-only torch build)
      triton         3.7.1 (runs on CPU through its interpreter, TRITON_INTERPRET=1)
      C++ compiler   g++ 12.2.0, OpenMP works
      graphviz       python package 0.21, dot 2.43.0
      ...
    Stage by stage on this machine:
      5 fusion         C++/OpenMP kernels (g++); Triton kernels under the interpreter
      ...

Later stages ask the same questions through :func:`probe` (cached), so the choice the
report announces is the choice the compiler makes.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata

from ._version import __version__

SUPPORTED_DYNAMO_PYTHONS = ((3, 11), (3, 12), (3, 13))


@dataclass
class Tool:
    """One thing the course can use: whether it is here, its version, and what to do if not."""
    name: str
    available: bool
    detail: str
    install_hint: str = ""


@dataclass
class Environment:
    python: str
    platform: str
    tools: dict[str, Tool] = field(default_factory=dict)
    stages: list[tuple[str, str]] = field(default_factory=list)

    @property
    def has_cuda(self) -> bool:
        return self.tools["cuda"].available

    @property
    def has_triton(self) -> bool:
        return self.tools["triton"].available

    @property
    def has_cxx(self) -> bool:
        return self.tools["cxx"].available

    @property
    def has_openmp(self) -> bool:
        return self.tools["cxx"].available and "OpenMP works" in self.tools["cxx"].detail

    @property
    def has_dot(self) -> bool:
        return shutil.which("dot") is not None

    def format(self) -> str:
        lines = [f"tutorcompile {__version__} on {self.platform}, Python {self.python}"]
        width = max(len(t.name) for t in self.tools.values())
        for tool in self.tools.values():
            lines.append(f"  {tool.name.ljust(width)}  {tool.detail}")
            if not tool.available and tool.install_hint:
                lines.append(f"  {''.ljust(width)}  → {tool.install_hint}")
        lines.append("Stage by stage on this machine:")
        width = max(len(s) for s, _ in self.stages)
        lines += [f"  {stage.ljust(width)}  {what}" for stage, what in self.stages]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else ""


def find_cxx() -> str | None:
    """The C++ compiler the CPU backend will use: $CXX, else g++, c++ or clang++ on PATH."""
    for candidate in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


@functools.cache
def openmp_works(cxx: str) -> bool:
    """Compile and link a two-line OpenMP program with ``cxx -fopenmp``."""
    src = "#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "omp_check.cpp")
        with open(path, "w") as f:
            f.write(src)
        try:
            result = subprocess.run([cxx, "-fopenmp", path, "-o", os.path.join(tmp, "a.out")],
                                    capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return result.returncode == 0


def _torch_tools() -> dict[str, Tool]:
    tools = {}
    try:
        import torch
    except ImportError:
        tools["torch"] = Tool("torch", False, "not installed",
                              "pip install torch (the course needs torch ≥ 2.4)")
        tools["cuda"] = Tool("CUDA", False, "unknown (torch missing)")
        return tools
    tools["torch"] = Tool("torch", True, torch.__version__)
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        cap = ".".join(map(str, torch.cuda.get_device_capability(0)))
        tools["cuda"] = Tool("CUDA", True, f"{name} (compute capability {cap}), "
                             f"CUDA {torch.version.cuda}")
    else:
        why = "a CPU-only torch build" if torch.version.cuda is None else "no GPU visible"
        tools["cuda"] = Tool("CUDA", False, f"not available ({why})",
                             "optional: GPU cells and CUDA Graphs need an NVIDIA GPU")
    return tools


@functools.cache
def probe() -> Environment:
    """Probe the machine once (compiler checks take a moment) and return the findings."""
    env = Environment(python=platform.python_version(),
                      platform=f"{platform.system()} {platform.machine()}")
    env.tools.update(_torch_tools())
    cuda = env.tools["cuda"].available

    triton = _version("triton")
    if triton is None:
        hint = ("pip install triton" if sys.platform == "linux"
                else "Triton ships for Linux only; the C++ backend is used instead")
        env.tools["triton"] = Tool("triton", False, "not installed", hint)
    elif cuda:
        env.tools["triton"] = Tool("triton", True, f"{triton} (compiles for the GPU)")
    else:
        env.tools["triton"] = Tool("triton", True, f"{triton} (runs on CPU through its "
                                   "interpreter, TRITON_INTERPRET=1)")

    cxx = find_cxx()
    if cxx is None:
        env.tools["cxx"] = Tool("C++ compiler", False, "not found",
                                "install g++ (apt-get install g++, or conda install cxx-compiler)")
    else:
        omp = "OpenMP works" if openmp_works(cxx) else "no OpenMP (kernels run single-threaded)"
        env.tools["cxx"] = Tool("C++ compiler", True,
                                f"{_first_line([cxx, '--version'])} ({cxx}), {omp}")

    gv = _version("graphviz")
    dot = shutil.which("dot")
    dot_version = _first_line(["dot", "-V"]).replace("dot - graphviz version ", "") if dot else ""
    env.tools["graphviz"] = Tool(
        "graphviz", bool(gv and dot),
        f"python package {gv or 'missing'}, dot {dot_version or 'missing'}",
        "apt-get install graphviz / brew install graphviz / conda install -c conda-forge "
        "graphviz (drawings fall back to text without it)")
    for dist in ("ipywidgets", "jupyterlab", "networkx"):
        version = _version(dist)
        env.tools[dist] = Tool(dist, version is not None, version or "not installed",
                               f"pip install {dist}")

    env.stages = _stage_plan(env)
    return env


def _stage_plan(env: Environment) -> list[tuple[str, str]]:
    py = sys.version_info[:2]
    version = f"{py[0]}.{py[1]}"
    dynamo = (f"bytecode capture (Python {version})" if py in SUPPORTED_DYNAMO_PYTHONS else
              f"not supported on Python {version}: use 3.11–3.13 (fx tracing still works)")
    cuda, triton, cxx = env.has_cuda, env.has_triton, env.has_cxx
    if cuda and triton:
        fusion = "Triton kernels compiled for the GPU; C++/OpenMP for CPU tensors" \
            if cxx else "Triton kernels compiled for the GPU"
    elif cxx:
        fusion = f"C++/OpenMP kernels ({os.path.basename(find_cxx() or '')})"
        if triton:
            fusion += "; Triton kernels under the interpreter (tests, notebooks)"
    elif triton:
        fusion = "Triton kernels under the interpreter (slow): install g++ for fast CPU code"
    else:
        fusion = "no kernel compiler: graphs run op by op (install g++ or triton)"
    return [
        ("1 autograd", "eager tape autograd on torch tensors"),
        ("2 fx tracing", "symbolic tracing with proxies"),
        ("3 dynamo", dynamo),
        ("4 aot", "joint graphs; min-cut partitioner" +
         ("" if env.tools["networkx"].available else " needs networkx")),
        ("5 fusion", fusion),
        ("6 cudagraphs", "record and replay on the GPU" if cuda else
         "needs a CUDA GPU: mode='reduce-overhead' runs without graphs here"),
        ("drawings", "graphviz SVG" if env.tools["graphviz"].available else
         "text rendering (graphviz's dot binary is missing)"),
    ]


def doctor() -> None:
    """Print what this machine has and which backend each stage will use."""
    print(probe().format())


def make_torchvision_importable() -> None:
    """Let ``import torchvision`` (and so ``transformers``, ``timm``) work with a CPU torch.

    PyPI's torchvision wheel for Linux is a CUDA build: with the CPU build of torch its C
    extension does not load, and its import then fails while registering fake kernels for
    ``torchvision::nms`` ("operator torchvision::nms does not exist"). ``transformers`` imports
    torchvision when it is installed, so it fails too. Defining the two op schemas that
    torchvision expects, before it is imported, is enough for the classification models
    (detection ops that need the C extension still do not run). Harmless when the extension
    loads or torchvision is absent; call it before anything imports torchvision.
    """
    global _torchvision_lib
    if _torchvision_lib is not None or importlib.util.find_spec("torchvision") is None:
        return
    import torch

    spec = importlib.util.find_spec("torchvision")
    locations = spec.submodule_search_locations if spec else None
    for extension in glob.glob(os.path.join((locations or [""])[0], "_C*.so")):
        try:
            torch.ops.load_library(extension)  # a build that matches torch: nothing to do
            return
        except (OSError, RuntimeError):
            pass
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _torchvision_lib = lib  # the schemas live as long as this object does


_torchvision_lib: object = None
