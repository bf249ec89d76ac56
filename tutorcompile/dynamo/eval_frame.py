"""``tutorcompile.compile``: the cache, graph breaks and recompiles that make capture usable.

Real Dynamo installs a hook in CPython's frame evaluation (PEP 523) and, for each frame,
looks up compiled code guarded by assumptions. We get the same behaviour without touching
the interpreter: a compiled function binds its arguments into a :class:`~.vm.Frame` (our VM's
frame: the continuation) and then loops:

1. Look up the cache for ``(code object, instruction index)``: a list of
   :class:`CacheEntry`, each with its own compiled guards. The first entry whose guards pass
   is used. On a miss, capture a new entry with the :class:`InstructionTranslator`
   (a *recompile* if entries existed -- logged with the guard that failed; after 8 the frame
   runs uncompiled, with a warning, as in PyTorch). :func:`compile_entry` is the stage's
   spine: capture -> graph -> backend -> guards -> entry, each a named function.
2. Run the entry: fetch its graph inputs through their sources, call the compiled graph,
   and rebuild the frame's stack and locals from the outputs (the trackers know how).
3. If the entry ended in a return, done. If it ended in a graph break, execute the breaking
   instruction *for real* with the concrete VM (calls to Python functions made there are
   compiled in turn, as Dynamo compiles every frame), then go to 1 at the next instruction.
   A data-dependent ``if`` simply continues at whichever side the real value picked, so each
   side gets its own cache entries.

A break inside a loop body would give one resume point per iteration; like Dynamo, such a
frame is *skipped*: it runs in the concrete VM (its callees are still compiled).

Automatic dynamic shapes: when a guard fails only because a tensor's size changed, the
differing dimensions are marked dynamic for that frame and the recompiled graph is size
generic (``dynamic=True`` marks every dimension of the arguments up front).

Artifacts (``TUTORCOMPILE_LOGS=graph_breaks,guards,recompiles,graph_code`` or
``tutorcompile.set_logs(...)``) report each capture as it happens.

Mirrors: torch/_dynamo/eval_frame.py, convert_frame.py, cache_size.py and the resume
functions of torch/_dynamo/resume_execution.py (here: saved VM frames instead of bytecode).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import operator
import os
import sysconfig
import time
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .._caches import reset_registered
from .._logging import log_artifact, phase, seconds_compiling
from ..amp import autocast_on
from ..cudagraphs import CUDAGraphed
from ..errors import FallbackWarning
from ..fastpath import fast_path
from ..fx import GraphModule
from ..fx.aliasing import storage_key
from ..fx.passes.dce_cse import is_impure, is_random, updates_running_stats
from . import config as dynamo_config
from .backends import check_options, lookup_backend
from .decorators import marked_dims
from .distributed import active_ddp, compile_under_ddp
from .exc import AssumptionFailed, GraphBreakError, RecompileLimitWarning
from .guards import CheckFunction, user_function_modes
from .source import KEYS
from .symbolic_convert import CaptureResult, InstructionTranslator
from .variables import (
    BUILTIN_HANDLERS,
    DELETED,
    ConstDictVariable,
    DeferredCallVariable,
    GlobalsVariable,
    Reconstructor,
    SymIntVariable,
    TensorVariable,
    VariableTracker,
)
from .variables.callables import compile_inside
from .variables.nn_module import own_call
from .variables.torch import defining_module, in_torch, traced_like_user_code
from .vm import _RETURN, CO_VARARGS, CO_VARKEYWORDS, VM, Frame, bind_arguments, can_interpret

MODES = {
    "default": "the backend as chosen: balanced compile time and speed",
    "reduce-overhead": "also record each compiled graph as a CUDA Graph and replay it "
                       "(GPU only; calls that cannot be recorded run normally, with a reason)",
    "max-autotune": "let the backend try several kernel configurations and keep the fastest "
                    "(backend='inductor'); others compile as in 'default'",
}


@dataclass
class Config:
    backend: Callable
    backend_name: str
    fullgraph: bool = False
    dynamic: bool | None = None
    mode: str = "default"
    options: dict = field(default_factory=dict)

    @functools.cached_property
    def cache_key(self) -> tuple:
        # graphs compiled for one backend/mode are never handed to another (computed once:
        # every call looks it up)
        return (id(self.backend), self.fullgraph, self.dynamic, self.mode,
                repr(sorted(self.options.items())))

    def backend_accepts(self, name: str) -> bool:
        try:
            params = inspect.signature(self.backend).parameters
        except (TypeError, ValueError):
            return False
        return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())

    def compile_graph(self, gm: GraphModule, example_inputs: list) -> Callable:
        """Hand one captured graph to the backend, honouring ``mode`` and ``options``."""
        kwargs: dict[str, Any] = {}
        if self.mode != "default" and self.backend_accepts("mode"):
            kwargs["mode"] = self.mode
        if self.options:
            kwargs["options"] = self.options
        compiled = self.backend(gm, example_inputs, **kwargs)
        if self.mode == "reduce-overhead" and "mode" not in kwargs:
            compiled = CUDAGraphed(compiled, dynamic=bool(self.dynamic),
                                   name=f"{self.backend_name} graph")
        return compiled


@dataclass
class CacheEntry:
    """One compiled segment: guards, graph, and how to rebuild the frame afterwards."""
    check: CheckFunction
    result: CaptureResult
    graph_module: GraphModule | None
    compiled: Callable | None
    output_nodes: list
    input_sources: list
    code_name: str
    start_ip: int
    scopes: dict = field(default_factory=dict)  # globals of inlined functions' modules
    # the cache-hit path, made once: one function fetching every graph input, and (for an
    # entry that returns one graph output as it is) which output the frame returns
    fetch_inputs: Any = None   # (a Callable once compile_entry has set it)
    returns_output: int | None = None
    # the guards and ``fetch_inputs`` as one generated function: the inputs' tuple when the
    # guards pass, else None (see ``CheckFunction.with_fetch``)
    check_and_fetch: Any = None   # (a Callable once set)
    # what runs the graph: ``compiled``, or its ``direct()`` form when the guards pin every
    # graph input's shape, strides, dtype, device and requires_grad, and the grad mode (the
    # backend need not key its inputs again; see ``AOTCompiled.direct``), or with dynamic
    # sizes its ``direct_dynamic()`` form
    call: Any = None   # (a Callable when there is a graph)

    @property
    def kind(self) -> str:
        return self.result.kind

    @functools.cached_property
    def returns_graph_output(self) -> bool:
        """Runs to its return, which is one output of its graph as it is, with nothing to do
        before or after the graph (no side effect to replay): a cache hit is the graph call."""
        return self.kind == "return" and self.compiled is not None and \
            self.returns_output is not None and not self.result.side_effects and \
            not self.result.prologue


@dataclass
class FrameCache:
    """Everything remembered about one code object (the first of the compiler's caches:
    ``tutorcompile/_caches.py`` lists them all, with their keys)."""
    entries: dict[int, list[CacheEntry]] = field(default_factory=dict)
    skip_from: set[int] = field(default_factory=set)  # resume points that run uncompiled
    # (resume point, source) -> dimensions seen to change. Keyed by resume point too: a
    # stack slot ``S[0]`` or a local rebound between two resume points names another tensor
    # at each (as the parameters of two of Dynamo's resume functions are two frames' own)
    dynamic: dict[tuple[int, str], set[int]] = field(default_factory=dict)
    warned: bool = False            # the recompile limit was hit (warned once)


@dataclass
class CallProfile:
    """Where the time of compiled calls goes (see ``tutorcompile.bench.breakdown``)."""
    compile_s: float = 0.0   # capturing graphs and running the backend
    guard_s: float = 0.0     # evaluating guard functions to pick a cache entry
    graph_s: float = 0.0     # running compiled graphs
    graph_calls: int = 0


PROFILE: CallProfile | None = None  # set by profiling(); None costs one global read


@contextlib.contextmanager
def profiling() -> Iterator[CallProfile]:
    """Count compile, guard and graph time of every compiled call inside the block."""
    global PROFILE
    saved, PROFILE = PROFILE, CallProfile()
    try:
        yield PROFILE
    finally:
        PROFILE = saved


_CACHES: dict[tuple, FrameCache] = {}  # (code object, config key) -> cache
RECOMPILE_LOG: list[str] = []
_LISTENERS: list[Any] = []  # explain() registers here to see every capture


def reset() -> None:
    """Forget every compiled graph, guard, dynamic-dimension mark and recompile log (and
    the later stages' caches of compiled graphs, registered in ``tutorcompile._caches``)."""
    _CACHES.clear()
    RECOMPILE_LOG.clear()
    reset_registered()


# --- the public entry point -----------------------------------------------------------------
def compile(model: Callable | None = None, *, backend: str | Callable = "inductor",
            fullgraph: bool = False, dynamic: bool | None = None, mode: str | None = None,
            options: dict | None = None):
    """Compile a function or ``nn.Module`` (usable as a decorator, with or without args).

    ``backend``: ``"inductor"`` (the default: our AOTAutograd and fused C++/Triton kernels),
    ``"eager"`` (run captured graphs as GraphModules: capture alone), ``"aot_eager"`` (plus
    our AOTAutograd, every op PyTorch's), ``"aot_eager_decomp_partition"`` (plus
    decompositions and the min-cut partitioner), ``"torch_inductor"`` (real Inductor via
    ``to_torch_fx``) or any ``(GraphModule, example_inputs) -> callable``.
    ``fullgraph=True`` raises :class:`GraphBreakError` at the first graph break.
    ``dynamic``: True = size-generic graphs from the start; None = automatic after a size
    change; False = always specialise.
    ``mode``: one of :data:`MODES` (``"default"``, ``"reduce-overhead"``, ``"max-autotune"``).
    ``options``: a dict handed to the backend, which must accept an ``options`` argument.
    """
    if model is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph,
                                 dynamic=dynamic, mode=mode, options=options)
    mode = mode or "default"
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")
    fn, name = lookup_backend(backend)
    config = Config(fn, name, fullgraph, dynamic, mode, dict(options or {}))
    if config.options and not config.backend_accepts("options"):
        raise ValueError(f"backend {name!r} takes no options (got {sorted(config.options)}); "
                         "options are for backends with an `options` argument, such as "
                         "'inductor'")
    valid_options = getattr(fn, "valid_options", None)
    if config.options and valid_options is not None:
        check_options(name, config.options, valid_options())
    if isinstance(model, torch.nn.Module):
        return OptimizedModule(model, config)
    return OptimizedCallable(model, config)


optimize = compile
BUILTIN_HANDLERS[compile] = compile_inside   # ``tc.compile(fn)`` met while tracing: ``fn``


class OptimizedCallable:
    """A compiled function: call it like the original."""

    def __init__(self, fn: Callable, config: Config):
        self._orig = fn
        self.config = config
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _run_plain(self._orig, list(args), kwargs, self.config)

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)


class OptimizedModule(torch.nn.Module):
    """A compiled ``nn.Module``: ``forward`` runs through the cache; state is shared."""

    def __init__(self, mod: torch.nn.Module, config: Config):
        super().__init__()
        self._orig_mod = mod
        self.config = config
        # a __call__ of the module's own class (gpytorch's kernels) is what runs, not forward
        self._own_call = own_call(type(mod))  # type: ignore[arg-type]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        mod: torch.nn.Module = self._modules["_orig_mod"]  # type: ignore[assignment]
        # (not ``self._orig_mod``: Module.__getattr__)
        if mod._forward_hooks or mod._forward_pre_hooks or mod._backward_hooks \
                or mod._backward_pre_hooks or any(_GLOBAL_HOOKS):
            return _call_with_hooks(mod, self._without_hooks, args, kwargs)
        if self._own_call is not None:
            return _run_plain(self._own_call, [mod, *args], kwargs, self.config)
        if "forward" in mod.__dict__:      # ``mod.forward = fn`` replaces the class's, as is
            return _run_plain(mod.__dict__["forward"], list(args), kwargs, self.config)
        return _run_plain(type(mod).forward, [mod, *args], kwargs, self.config)

    def _without_hooks(self, *args: Any, **kwargs: Any) -> Any:
        """``forward`` past its hook test, for the hooks to run around
        (:func:`_call_with_hooks`); ``forward`` repeats it inline, a call less per hit."""
        mod: torch.nn.Module = self._modules["_orig_mod"]  # type: ignore[assignment]
        if self._own_call is not None:
            return _run_plain(self._own_call, [mod, *args], kwargs, self.config)
        if "forward" in mod.__dict__:
            return _run_plain(mod.__dict__["forward"], list(args), kwargs, self.config)
        return _run_plain(type(mod).forward, [mod, *args], kwargs, self.config)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


# nn.Module's global hook dicts (``register_module_forward_hook``...), the same objects for
# the life of the process
_GLOBAL_HOOKS = (torch.nn.modules.module._global_forward_hooks,
                 torch.nn.modules.module._global_forward_pre_hooks,
                 torch.nn.modules.module._global_backward_hooks,
                 torch.nn.modules.module._global_backward_pre_hooks)


def _call_with_hooks(mod: torch.nn.Module, forward: Callable, args: tuple, kwargs: dict
                     ) -> Any:
    """What ``mod(*args, **kwargs)`` does with hooks, around the compiled ``forward``: its
    forward pre-hooks and forward hooks (global ones first), with or without kwargs, and
    its full backward hooks and backward pre-hooks, as ``nn.Module._call_impl`` runs them.
    A full backward hook sees the gradients at the module's boundary: PyTorch's own
    ``BackwardHook`` wraps the inputs and the outputs in identity autograd functions
    whose backward calls the hooks, and the compiled forward runs between them -- as
    torch.compile runs a module with backward hooks (a break around it, its forward a
    graph of its own). A legacy ``register_backward_hook`` hooks the ``grad_fn`` of the
    forward's last op, which a compiled forward does not have: that call runs the module
    uncompiled, and says so."""
    module = torch.nn.modules.module
    full: list = []
    legacy: list = []
    if mod._backward_hooks or module._global_backward_hooks:
        full, legacy = mod._get_backward_hooks()
    if legacy:
        warnings.warn(f"tutorcompile: {type(mod).__name__} has a backward hook registered "
                      "with register_backward_hook; it runs uncompiled (register it with "
                      "register_full_backward_hook to compile it)", FallbackWarning,
                      stacklevel=3)
        return mod(*args, **kwargs)
    pre = mod._get_backward_pre_hooks() \
        if mod._backward_pre_hooks or module._global_backward_pre_hooks else []
    for hook_id, hook in (*module._global_forward_pre_hooks.items(),
                          *mod._forward_pre_hooks.items()):
        if hook_id in mod._forward_pre_hooks_with_kwargs:
            result = hook(mod, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        else:
            result = hook(mod, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    backward_hook = None
    if full or pre:
        backward_hook = torch.utils.hooks.BackwardHook(mod, full, pre)
        args = backward_hook.setup_input_hook(args)
    output = forward(*args, **kwargs)
    for hook_id, hook in (*module._global_forward_hooks.items(),
                          *mod._forward_hooks.items()):
        if hook_id in mod._forward_hooks_with_kwargs or \
                hook_id in module._global_forward_hooks_with_kwargs:
            result = hook(mod, args, kwargs, output)
        else:
            result = hook(mod, args, output)
        if result is not None:
            output = result
    if backward_hook is not None:
        output = backward_hook.setup_output_hook(output)
    return output


# --- running frames ---------------------------------------------------------------------------
_STDLIB = sysconfig.get_paths().get("stdlib", "//none//")
_TORCH = os.path.dirname(torch.__file__) + os.sep


def should_compile(fn: Any) -> bool:
    """Frames we capture: plain Python functions outside torch, this package and the stdlib
    -- and in torch's packages traced like user code (an optimizer's ``step``, run as a
    frame of its own when the ``_use_grad`` wrapper around it breaks) -- and not marked
    ``torch.compiler.disable`` (whose wrapper lives in torch, though ``functools.wraps``
    gave it the module of the function it wraps)."""
    if not can_interpret(fn) or fn.__dict__.get("_torchdynamo_disable"):
        return False
    module = getattr(fn, "__module__", "") or ""
    if traced_like_user_code(defining_module(fn)):
        return True
    if in_torch(module) or module.startswith(("tutorcompile.", "typing", "functools")):
        return False
    filename = fn.__code__.co_filename
    return not filename.startswith((_STDLIB, _TORCH))


def _run_plain(fn: Callable, args: list, kwargs: dict, config: Config) -> Any:
    """:func:`run_compiled` for a compiled function or module's ``forward``, with the
    cache-hit path first: a plain function goes straight to :func:`_fast_cache_hit` (no
    unwrapping of methods and wrappers to do)."""
    if type(fn) is types.FunctionType:
        hit = _fast_cache_hit(fn, args, kwargs, config)
        if hit is not _MISS:
            return hit
        if can_interpret(fn):
            return run_frame(VM().make_frame(fn, args, kwargs), config)
    return run_compiled(fn, args, kwargs, config)


def run_compiled(fn: Callable, args: list, kwargs: dict, config: Config) -> Any:
    if isinstance(fn, types.MethodType):
        return run_compiled(fn.__func__, [fn.__self__, *args], kwargs, config)
    if isinstance(fn, (OptimizedCallable,)):
        fn = fn._orig
    if not can_interpret(fn):
        return fn(*args, **kwargs)
    hit = _fast_cache_hit(fn, args, kwargs, config)
    if hit is not _MISS:
        return hit
    frame = VM().make_frame(fn, args, kwargs)
    return run_frame(frame, config)


_MISS = object()


def _fast_cache_hit(fn: Any, args: list, kwargs: dict, config: Config
                    ) -> Any:
    """The cache-hit path of a call: bind the arguments as the VM's frame would (keywords,
    defaults, ``*args``/``**kwargs``, the closure's cells), find the first entry whose
    guards pass, and if it runs to its return, run it (:func:`run_segment`: the graph, the
    value returned, the writes to outside objects replayed) -- no VM frame, no second check
    of the guards. An entry that ends in a graph break goes on in the VM from that entry
    (:func:`run_frame` with ``first``). A miss, a recompile or arguments that do not bind
    answer ``_MISS``: the general path of :func:`run_frame` takes the call."""
    code = fn.__code__
    cache = _CACHES.get((code, config.cache_key))
    if cache is None or 0 in cache.skip_from:
        return _MISS
    if not kwargs and len(args) == code.co_argcount and not code.co_kwonlyargcount and \
            not code.co_flags & (CO_VARARGS | CO_VARKEYWORDS):
        f_locals = dict(zip(code.co_varnames, args))
    else:  # (transformers' forwards: ``wrapper(self, *args, **kwargs)`` and keywords)
        try:
            f_locals = bind_arguments(code, list(args), dict(kwargs), fn.__defaults__,
                                      fn.__kwdefaults__, fn.__name__)
        except TypeError:  # the general path raises CPython's error
            return _MISS
    if code.co_freevars:  # as ``VM.wrap_closure_cell`` binds them: the cells themselves
        f_locals.update(zip(code.co_freevars, fn.__closure__ or ()))
    f_globals = fn.__globals__
    b = f_globals.get("__builtins__", builtins)
    stack: list[Any] = []
    env_args = (f_locals, f_globals, b if isinstance(b, dict) else b.__dict__, stack)
    prof = PROFILE
    t0 = time.perf_counter() if prof else 0.0
    for entry in cache.entries.get(0, ()):
        inputs = entry.check_and_fetch(*env_args)
        if inputs is not None:
            break
    else:
        entry = None
    if prof:
        prof.guard_s += time.perf_counter() - t0
    if entry is None:
        return _MISS
    try:
        if entry.returns_graph_output:
            if prof:
                return _profiled_graph_call(entry, inputs)[entry.returns_output]
            return entry.call(*inputs)[entry.returns_output]
        if entry.result.kind == "return":  # a value to build, writes to replay
            return run_segment(entry, *env_args, inputs)
    except AssumptionFailed:   # run_frame runs it again, and then uncompiled
        return _MISS
    # a graph break: the frame goes on in the VM from the breaking instruction
    return run_frame(VM().make_frame(fn, args, kwargs), config, entry)


def _profiled_graph_call(entry: CacheEntry, inputs: tuple) -> Any:
    """Run the entry's compiled graph, counting its time when profiling."""
    prof = PROFILE
    if not prof:
        return entry.call(*inputs)
    # GPU kernels run asynchronously: wait for them, so the graph's time is its work
    sync = any(isinstance(v, torch.Tensor) and v.is_cuda for v in inputs)
    if sync:
        torch.cuda.synchronize()
    compiling, t0 = seconds_compiling(), time.perf_counter()
    values = entry.call(*inputs)
    if sync:
        torch.cuda.synchronize()
    # a first call that waits for its kernels to build (a compile phase) spends that on compiling
    compiling = seconds_compiling() - compiling
    prof.compile_s += compiling
    prof.graph_s += time.perf_counter() - t0 - compiling
    prof.graph_calls += 1
    return values


def _input_fetcher(sources: list, scopes: dict, env: dict) -> Callable:
    """One generated function that fetches every graph input through its source
    (``return (L['x'], L['self'].fc.weight)``), instead of walking each source per call.

    Checked once against each source's own ``get``; a source whose name is not an
    expression that rebuilds it keeps the walk."""
    def walk(L, G, B, S):
        scope = {"L": L, "G": G, "B": B, "S": S, **scopes}
        return tuple(src.get(scope) for src in sources)
    body = "".join(f"{src.name()}, " for src in sources)
    text = f"def fetch_inputs(L, G, B, S):\n    return ({body})\n"
    namespace = {"__builtins__": builtins, "K": KEYS, **scopes}
    try:
        # (builtins.compile: this module defines its own compile, tutorcompile.compile)
        exec(builtins.compile(text, "<tutorcompile graph inputs>", "exec"), namespace)
        fetch = namespace["fetch_inputs"]
        expected = walk(env["L"], env["G"], env["B"], env["S"])
        got = fetch(env["L"], env["G"], env["B"], env["S"])
        if len(got) == len(expected) and all(a is b for a, b in zip(got, expected)):
            return fetch
    except Exception:  # noqa: BLE001 -- any failure keeps the walk, which is always right
        pass
    return walk


def _check_and_fetch(entry: CacheEntry, env: dict) -> Callable:
    """The cache-hit path's one call per entry: the guards, then (when they pass) the graph
    inputs, read from the locals the guards bound (``CheckFunction.with_fetch``). Checked
    once against ``check`` and ``fetch_inputs``; if the two disagree it is the two of them
    in turn."""
    check, fetch = entry.check.fn, entry.fetch_inputs

    def in_turn(L, G, B, S):
        return fetch(L, G, B, S) if check(L, G, B, S) else None
    try:
        merged = entry.check.with_fetch(entry.input_sources, entry.scopes)
        args = (env["L"], env["G"], env["B"], env["S"])
        got, expected = merged(*args), in_turn(*args)
        if got is not None and expected is not None and len(got) == len(expected) and all(
                a is b for a, b in zip(got, expected)):
            return merged
    except Exception:  # noqa: BLE001 -- any failure keeps the two calls, always right
        pass
    return in_turn


def run_frame(frame: Frame, config: Config, first: CacheEntry | None = None) -> Any:
    """Run ``frame`` to its return: at each resume point, the first cache entry whose guards
    pass (``first``, when the cache-hit path already checked them at the start), else a new
    capture; the breaking instruction between two entries runs in the VM, for real."""
    key = (frame.code, config.cache_key)
    cache = _CACHES.get(key)
    if cache is None:
        cache = _CACHES[key] = FrameCache()
    runner = None
    while True:
        ip = frame.ip
        if ip in cache.skip_from:
            return ConcreteRunner(config).run(frame)
        entries = cache.entries.setdefault(ip, [])
        env_args = (frame.locals, frame.globals, frame.builtins, frame.stack)
        prof = PROFILE
        t0 = time.perf_counter() if prof else 0.0
        entry: CacheEntry | None
        if first is not None:
            entry, first = first, None
        else:
            entry = next((e for e in entries if e.check(*env_args)), None)
        if prof:
            prof.guard_s += time.perf_counter() - t0
        if entry is None:
            if len(entries) >= dynamo_config.recompile_limit:
                if not cache.warned:
                    cache.warned = True
                    warnings.warn(
                        f"tutorcompile: {frame.code.co_name} (resume point {ip}) hit the "
                        f"recompile limit ({dynamo_config.recompile_limit}); running it "
                        "uncompiled from now on", RecompileLimitWarning, stacklevel=3)
                return ConcreteRunner(config).run(frame)
            modes = user_function_modes()
            if modes:
                # ``with MyMode():`` around the call (or entered before a break): its
                # ``__torch_function__`` decides what each torch call computes, which a
                # graph traced on fake tensors cannot hold -- this call runs uncompiled
                reason = f"a torch function mode is active ({type(modes[-1]).__name__})"
                if config.fullgraph:
                    raise GraphBreakError(reason, frame.code.co_filename,
                                          frame.code.co_firstlineno, "")
                return ConcreteRunner(config).run(frame)
            if entries:
                _note_recompile(frame, cache, entries)
            t0 = time.perf_counter() if prof else 0.0
            with phase("capture"):
                entry = compile_entry(frame, cache, config)
            if prof:
                prof.compile_s += time.perf_counter() - t0
            if entry is None:
                return ConcreteRunner(config).run(frame)
            entries.append(entry)
        try:
            outcome = execute_entry(entry, frame)
        except AssumptionFailed:   # nothing was written yet: run it as the program does
            return ConcreteRunner(config).run(frame)
        if outcome is _RETURN:
            return frame.return_value
        runner = runner or ConcreteRunner(config)
        if runner.step(frame) is _RETURN:
            return frame.return_value
        # the breaking instruction raised and this frame catches it: the handler runs
        # uncompiled to its end, as no resume point can rebuild the exception being handled
        while frame.exc_stack or frame.instructions[frame.ip].opname == "PUSH_EXC_INFO":
            if runner.step(frame) is _RETURN:
                return frame.return_value


def _note_recompile(frame: Frame, cache: FrameCache, entries: list[CacheEntry]) -> None:
    env_args = (frame.locals, frame.globals, frame.builtins, frame.stack)
    reasons = [e.check.failure(*env_args) or "?" for e in entries]
    where = f"{frame.code.co_name} (resume point {frame.ip})" if frame.ip else \
        frame.code.co_name
    start = len(RECOMPILE_LOG)
    if len(reasons) == 1:
        RECOMPILE_LOG.append(f"Recompiling {where}: guard failed: {reasons[0]}")
    else:
        RECOMPILE_LOG.append(f"Recompiling {where}: guard failures:")
        RECOMPILE_LOG.extend(f"  entry {i}: {r}" for i, r in enumerate(reasons))
    # automatic dynamic: a size-only change marks the differing dims dynamic
    for guard, value in (hit for e in entries for hit in e.check.failing_tensors(*env_args)):
        assert guard.tensor_args is not None and guard.source is not None   # (TENSOR_MATCH)
        expected = guard.tensor_args[3]
        if len(expected) == value.dim():
            dims = {d for d, (a, b) in enumerate(zip(value.shape, expected))
                    if b is not None and a != b}
            key = (frame.ip, guard.source.name())
            new = dims - cache.dynamic.get(key, set())
            if new:
                cache.dynamic.setdefault(key, set()).update(new)
                RECOMPILE_LOG.append(f"  marking {key[1]} dims {sorted(new)} as dynamic")
    log_artifact("recompiles", lambda: "\n".join(RECOMPILE_LOG[start:]), where)


def compile_entry(frame: Frame, cache: FrameCache, config: Config) -> CacheEntry | None:
    """Stage 3's spine: one frame, from its resume point, to a guarded cache entry. It runs
    in the compile phase ``capture`` (``_logging.SPINE``); the backend's stages (``aot``,
    ``inductor``) run inside it::

        capture   bytecode -> graph + guards, to a return or a graph break  (capture_frame:
                  the InstructionTranslator of symbolic_convert.py)
        graph     the graph returns what the rebuilt frame needs           (finish_graph)
        backend   the backend compiles the graph          (call_backend: config's backend)
        guards    the check each call runs before the entry's graph       (build_guards)
        entry     the cache entry: how to fetch its inputs, its fast path    (make_entry)

    None: the frame runs uncompiled from here (capture skipped it)."""
    result = capture_frame(frame, cache, config)
    if result is None:
        return None
    output_nodes = finish_graph(result)
    under_autocast = autocast_on()
    gm, compiled = call_backend(frame, result, config, under_autocast)
    check = build_guards(result, gm)
    entry = make_entry(frame, result, check, gm, compiled, output_nodes, under_autocast)
    _notify("graph", frame, result, entry)
    log_artifact("guards", lambda: str(entry.check), _where(frame))
    _log_break(frame, result)
    return entry


def _where(frame: Frame) -> str:
    return f"{frame.code.co_name}" + (f" (resume point {frame.ip})" if frame.ip else "")


def capture_frame(frame: Frame, cache: FrameCache, config: Config) -> CaptureResult | None:
    """The spine's ``capture``: run the frame's bytecode symbolically (dims marked or found
    dynamic become symbols) to a graph, its guards and how the frame ends. None when the
    frame is to run uncompiled from here -- capture skipped it, or it broke inside a loop
    -- (``fullgraph=True``: a :class:`GraphBreakError` instead)."""
    def dynamic_dims(source, value):
        name = source.name()
        dims = set(cache.dynamic.get((frame.ip, name), ()))
        if config.dynamic and name.startswith(("L[", "S[")) and "." not in name:
            dims |= set(range(value.dim()))
        marked_dynamic, marked_static = marked_dims(value)
        dims = (dims | marked_dynamic) - marked_static
        if config.dynamic is False:
            dims = set()
        return frozenset(d for d in dims if d < value.dim() and value.shape[d] >= 2)

    result = InstructionTranslator(frame, dynamic_dims).capture()
    if result.assumptions and result.output is not None and \
            not _rerun_safe(result.output.graph):
        # a failed assumption reruns the frame: not with a graph that writes or draws
        result = InstructionTranslator(frame, dynamic_dims, assume=False).capture()
    if result.kind == "skip":
        if config.fullgraph:  # running the frame uncompiled is a break as much as a break
            filename, lineno, text = result.location or (
                frame.code.co_filename, frame.code.co_firstlineno, "")
            raise GraphBreakError(result.reason or "a graph break", filename, lineno, text)
        cache.skip_from.add(frame.ip)
        _notify("skip", frame, result, None)
        return None
    if result.kind == "break":
        if config.fullgraph:
            filename, lineno, text = result.location or (frame.code.co_filename, None, "")
            raise GraphBreakError(result.reason or "a graph break", filename, lineno, text)
        if result.in_loop:
            # a break inside a loop body: skip this frame from here (as Dynamo does)
            cache.skip_from.add(frame.ip)
            _notify("skip", frame, result, None)
            _log_break(frame, result)
            return None
    return result


def finish_graph(result: CaptureResult) -> list:
    """The spine's ``graph``: the captured graph returns the tensors and sizes the rebuilt
    frame needs that only the graph can provide (returned: the output nodes); tensor hooks
    applied; sizes nothing reads dropped."""
    output = result.output
    assert output is not None   # (a graph: capture made one)
    live: list[Any] = list(result.stack) + list(result.locals.values()) + \
        [value for _, _, value in result.side_effects]  # containers: visit() reaches items
    if result.return_value is not None:
        live.append(result.return_value)
    live += [cond for cond, _ in result.assumptions]
    output_nodes = _graph_outputs(live)
    output.graph.output(tuple(output_nodes))
    output.apply_tensor_hooks()   # (the output reads the hooked tensors too)
    for node in reversed(output.graph.nodes):  # x.shape made every size; drop unused ones
        if node.op == "call_method" and node.target == "size" and not node.users:
            output.graph.erase_node(node)
    return output_nodes


def call_backend(frame: Frame, result: CaptureResult, config: Config, under_autocast: bool
                 ) -> tuple[GraphModule | None, Callable | None]:
    """The spine's ``backend``: the graph as a GraphModule, and what the backend compiled
    it to (stages 4 and 5 for ``"inductor"``); both None for a graph with no op."""
    output = result.output
    assert output is not None   # (a graph: capture made one)
    if not output.op_count:
        return None, None
    where = _where(frame)
    gm = GraphModule(torch.nn.Module(), output.graph, class_name="GraphModule")
    log_artifact("graph_code", lambda: gm.code, where)   # before the backend's artifacts
    # captured under autocast: the graph holds every cast autocast made, so the backend
    # compiles it, and it runs, with autocast off (as AOTAutograd's runtime wrapper
    # does); the AUTOCAST guard keeps it to calls made under this state
    with torch._C._DisableAutocast() if under_autocast else contextlib.nullcontext():
        ddp = active_ddp()   # under DistributedDataParallel: pieces at its buckets
        if ddp is not None:
            return gm, compile_under_ddp(ddp, gm, list(output.input_values),
                                         config.compile_graph, where)
        return gm, config.compile_graph(gm, list(output.input_values))


def build_guards(result: CaptureResult, gm: GraphModule | None) -> CheckFunction:
    """The spine's ``guards``: the check function of what capture relied on (plus, for a
    graph that writes an input, which inputs may share memory)."""
    output, guards = result.output, result.guards
    assert output is not None and guards is not None   # (a graph: capture made both)
    if gm is not None and _writes_an_input(output.graph):
        guards.TENSOR_ALIASING(output.input_sources, output.input_values)
    return guards.build()


def make_entry(frame: Frame, result: CaptureResult, check: CheckFunction,
               gm: GraphModule | None, compiled: Callable | None, output_nodes: list,
               under_autocast: bool) -> CacheEntry:
    """The spine's ``entry``: the cache entry -- its guards, how to fetch its graph's inputs
    from the frame (checked and fetched in one call where it can), and what a call runs:
    the compiled graph's fast path (:mod:`tutorcompile.fastpath`), run without autocast
    when captured under it, checking capture's assumptions on its outputs."""
    output = result.output
    assert output is not None   # (a graph: capture made one)
    scopes = {k: v for k, v in check.env.items() if k.startswith("G_")}
    sources = list(output.input_sources)
    entry = CacheEntry(check, result, gm, compiled, output_nodes, sources,
                       frame.code.co_name, frame.ip, scopes, call=compiled)
    if compiled is not None:   # (the guards pin what the compiled callable would check)
        entry.call = fast_path(compiled, dynamic=output.any_dynamic)
    if under_autocast and compiled is not None:
        entry.call = _without_autocast(entry.call)
    if result.assumptions:
        entry.call = checked_call(entry.call, [(output_nodes.index(cond.node), truth)
                                               for cond, truth in result.assumptions])
    env = {"L": frame.locals, "G": frame.globals, "B": frame.builtins, "S": frame.stack}
    entry.fetch_inputs = _input_fetcher(sources, scopes, env)
    entry.check_and_fetch = _check_and_fetch(entry, env)
    ret = result.return_value
    if (result.kind == "return" and type(ret) is TensorVariable and ret.source is None
            and ret.node in output_nodes):   # (not a NumPy array: that is rebuilt from it)
        entry.returns_output = output_nodes.index(ret.node)
    return entry


def _without_autocast(call: Callable) -> Callable:
    """A compiled graph captured under autocast, run with autocast off: its casts are in
    the graph, and its ops must not be cast again (a kernel of ours never would be, an op
    left to PyTorch would)."""
    def run(*args: Any) -> Any:
        with torch._C._DisableAutocast():
            return call(*args)
    return run


def _log_break(frame: Frame, result: CaptureResult) -> None:
    if result.kind != "break":
        return
    filename, lineno, text = result.location or ("?", None, "")
    short = filename.rsplit("/", 1)[-1]
    log_artifact("graph_breaks", lambda: f"{result.reason}\n    at {short}:{lineno}: {text}",
                 frame.code.co_name + (" (frame skipped: break inside a loop)"
                                       if result.in_loop else ""))


def _graph_outputs(live: list[Any]) -> list:
    """Tensors and sizes the rebuilt frame needs that only the graph can provide."""
    nodes, seen, visited = [], set(), set()

    def visit(vt):
        if not isinstance(vt, VariableTracker) or id(vt) in visited:
            return
        visited.add(id(vt))
        if isinstance(vt, (TensorVariable, SymIntVariable)):
            is_input = isinstance(vt, TensorVariable) and vt.node.op == "placeholder"
            if not is_input and vt.node not in seen:
                seen.add(vt.node)
                nodes.append(vt.node)
            return
        for child in vt.children():
            visit(child)
        for attr in ("items",):  # a dict's entries are its children (unread ones of a
            # dict from outside stay unwrapped: reading ``items`` would wrap them now)
            value = None if isinstance(vt, ConstDictVariable) else getattr(vt, attr, None)
            if isinstance(value, list):
                for item in value:
                    visit(item)
            elif isinstance(value, dict):
                for item in value.values():
                    visit(item)
    for vt in live:
        visit(vt)
    return nodes


def _rerun_safe(graph) -> bool:
    """Whether running ``graph`` and then the frame again (uncompiled) is the same as
    running the frame once: no node writes a tensor from outside (an in-place op on an
    input or a view of one, BatchNorm's running statistics) or draws a random number. A
    write into a tensor the graph made (piq's ``kernel[k // 2:] = -kernel[k // 2:]`` on a
    filter it built) is gone with the graph's other intermediates: running again makes it
    again. Whether a written tensor is an input's is asked of storages, as the fake
    examples share them (a view, a ``detach``, a no-op ``.to`` of an input)."""
    outside = {storage_key(p.meta.get("example_value")) for p in graph.nodes
               if p.op == "placeholder"} - {None}
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or not is_impure(node):
            continue
        written = _written_tensors(node)
        if written is None or any(storage_key(t) in outside or storage_key(t) is None
                                  for t in written):
            return False
    return True


def _writes_an_input(graph) -> bool:
    """Whether ``graph`` may write a tensor from outside (an input, or a view of one): an
    in-place op, ``out=``, ``t[i] = v``, or a call whose writes are unknown (a module,
    running statistics). Such a graph is guarded on which inputs share memory
    (:meth:`~tutorcompile.dynamo.guards.GuardBuilder.TENSOR_ALIASING`); a graph that only
    reads its inputs computes the same values whether they alias or not. A random draw
    into a new tensor writes nothing from outside."""
    inputs = {storage_key(p.meta.get("example_value")) for p in graph.nodes
              if p.op == "placeholder"} - {None}
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or not is_impure(node):
            continue
        written = _written_tensors(node, draws=True)
        if written is None:
            if is_random(node) and not node.meta.get("impure") and \
                    node.op in ("call_function", "call_method"):
                continue   # a draw that writes no argument (torch.rand, F.dropout)
            return True
        if any(storage_key(t) in inputs or storage_key(t) is None for t in written):
            return True
    return False


def _written_tensors(node, draws: bool = False) -> list | None:
    """The example values of the tensors a node writes when it is a plain write -- an
    in-place method or function (``t.mul_(2)``, ``F.relu(t, inplace=True)``), ``t[i] = v``,
    ``out=`` -- and nothing else; None for any other effect (a draw, a module, a print,
    running statistics, an operator schema's writes)."""
    if node.meta.get("impure") or node.op not in ("call_function", "call_method") or \
            (is_random(node) and not draws) or updates_running_stats(node):
        return None
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.target is operator.setitem or (name.endswith("_") and not name.endswith("__")) \
            or node.kwargs.get("inplace") is True:
        targets = node.args[:1]
    elif node.kwargs.get("out") is not None:
        targets = [node.kwargs["out"]]
    else:
        return None
    flat = [t for a in targets for t in (a if isinstance(a, (list, tuple)) else [a])]
    if not flat or not all(hasattr(t, "meta") for t in flat):
        return None
    return [t.meta.get("example_value") for t in flat]


def checked_call(call: Callable, checks: list[tuple[int, bool]]) -> Callable:
    """``call`` followed by the checks of the assumptions its graph was traced under (the
    truth of the outputs at these positions); :class:`AssumptionFailed` when one fails."""
    def run(*inputs):
        outputs = call(*inputs)
        for position, truth in checks:
            if bool(outputs[position]) is not truth:
                raise AssumptionFailed
        return outputs
    return run


def execute_entry(entry: CacheEntry, frame: Frame) -> Any:
    """Run ``entry`` on ``frame``: ``_RETURN`` (with ``frame.return_value`` set) where it
    returns, else None with the frame moved to the breaking instruction."""
    outcome = run_segment(entry, frame.locals, frame.globals, frame.builtins, frame.stack)
    if entry.kind == "return":
        frame.return_value = outcome
        return _RETURN
    frame.stack, frame.locals = outcome
    assert entry.result.break_ip is not None   # (an entry that breaks)
    frame.ip = entry.result.break_ip
    return None


def run_segment(entry: CacheEntry, L: dict, G: dict, B: dict, S: list,
                inputs: tuple | None = None) -> Any:
    """What one compiled segment does on a call whose guards passed: the prologue, the
    graph (on ``inputs`` where the guards already fetched them), the values the frame goes
    on with -- its return value, or the ``(stack, locals)`` at the break -- and the writes
    to outside objects replayed. The VM's frame and the cache-hit path share it."""
    env = {"L": L, "G": G, "B": B, "S": S}
    if entry.scopes:
        env.update(entry.scopes)
    outputs: dict = {}
    for fn, args in entry.result.prologue:   # ``torch.manual_seed(s)``: before the graph
        fn(*args)
    if entry.compiled is not None:
        if inputs is None:
            inputs = entry.fetch_inputs(L, G, B, S)
        outputs = dict(zip(entry.output_nodes, _profiled_graph_call(entry, inputs)))
    rc = Reconstructor(env, outputs)
    result = entry.result
    # the values the frame goes on with are fetched before the writes are replayed: a source
    # names what the traced code read (``a = d["k"]; d["k"] = 5`` -- ``a`` is the old value,
    # and ``kwargs.pop("flag")`` must not make ``flag`` unreachable)
    if result.kind == "return":
        return_value = rc(result.return_value)
    else:
        new_stack = [rc(v) for v in result.stack]
        new_locals = {k: rc(v) for k, v in result.locals.items()}
    if result.side_effects:  # writes the traced code made to outside objects, in order
        writes = [(vt, rc(vt), name, rc(value) if name is not None
                   else value.rebuild_items(rc)) for vt, name, value in result.side_effects]
        for vt, obj, name, value in writes:
            if isinstance(vt, DeferredCallVariable):  # ``warnings.warn(...)``, made now
                fn, args, kwargs = value
                fn(*args, **kwargs)
            elif isinstance(vt, GlobalsVariable):  # ``global N; N = v`` / ``del N``
                if value is DELETED:
                    del obj[name]
                else:
                    obj[name] = value
            elif name is not None:
                if value is DELETED:
                    delattr(obj, name)
                else:
                    setattr(obj, name, value)
            elif isinstance(obj, (dict, set)):
                obj.clear()
                obj.update(value)
            else:
                obj[:] = value
    return return_value if result.kind == "return" else (new_stack, new_locals)


def _pass_through_frames() -> frozenset:
    """torch functions whose work is to call the user's module: ``DistributedDataParallel``'s
    ``forward`` (buffers synced, buckets prepared, the reducer told which outputs to expect)
    and ``_run_ddp_forward``. Called uncompiled, they would call the module uncompiled too,
    so their frames run in our VM, for real, and the module they call is compiled as a frame
    of its own -- as PyTorch's Dynamo skips DDP's frames and compiles the module's, which
    its frame-evaluation hook sees. The gradients' all-reduce stays DDP's: the reducer's
    hooks fire as the compiled backward accumulates each gradient. DDP's forward marks
    itself active around the call, and the module's graph is split at its buckets
    (:mod:`.distributed`) so that they fire piece by piece."""
    ddp = torch.nn.parallel.DistributedDataParallel
    return frozenset({ddp.forward, ddp._run_ddp_forward})


PASS_THROUGH = _pass_through_frames()


def _context_decorator_wrappers() -> frozenset:
    """The code of the wrappers a context manager used as a decorator puts around a function:
    torch's ``decorate_context`` (``@torch.no_grad()``, ``@torch.enable_grad()``,
    ``@torch.set_grad_enabled(False)``, ``@torch.inference_mode()``: an optimizer's ``step``),
    autocast's ``decorate_autocast`` and contextlib's ``ContextDecorator`` (``inner``: a
    ``@contextmanager`` generator used as a decorator). Each is ``with cm: return
    func(*args, **kwargs)`` in a file that is not compiled; called for real from a frame that
    broke, it would run ``func`` uncompiled too, so a break inside an optimizer's step lost
    the whole step to eager. They run in our VM instead, the region entered for real, and
    ``func`` is compiled as a frame of its own -- as PyTorch's Dynamo, whose frame hook sees
    every frame, compiles the decorated function's."""
    class _Region(contextlib.ContextDecorator):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def fn():
        pass

    wrapped = [torch.no_grad()(fn), _Region()(fn), torch.autocast("cpu", enabled=False)(fn)]
    return frozenset(w.__code__ for w in wrapped if isinstance(w, types.FunctionType))


CONTEXT_DECORATOR_WRAPPERS = _context_decorator_wrappers()


class ConcreteRunner(VM):
    """Executes breaking instructions (and skipped frames) for real; callees are compiled."""

    def __init__(self, config: Config):
        super().__init__(inline_calls=False)
        self.config = config

    def call(self, fn, args, kwargs):
        if fn is super and not args and not kwargs:
            return super().call(fn, args, kwargs)
        target, bound = fn, list(args)
        if isinstance(fn, types.MethodType):
            target, bound = fn.__func__, [fn.__self__, *args]
        if target in PASS_THROUGH or isinstance(target, types.FunctionType) and \
                target.__code__ in CONTEXT_DECORATOR_WRAPPERS:
            return ConcreteRunner(self.config).run(VM().make_frame(target, bound, kwargs))
        if isinstance(target, types.FunctionType) and should_compile(target):
            if not has_tensor_in_frame(target, bound, kwargs):
                return fn(*args, **kwargs)
            return run_compiled(target, bound, kwargs, self.config)
        call = own_call(type(fn)) if isinstance(fn, torch.nn.Module) else None
        if call is not None:  # a module class's own __call__ (gpytorch's kernels)
            return run_compiled(call, [fn, *args], kwargs, self.config)
        if isinstance(fn, torch.nn.Module):
            forward = type(fn).forward
            if isinstance(forward, types.FunctionType) and should_compile(forward) \
                    and "forward" not in fn.__dict__:
                if not (fn._forward_hooks or fn._forward_pre_hooks or fn._backward_hooks
                        or fn._backward_pre_hooks or any(_GLOBAL_HOOKS)):
                    return run_compiled(forward, [fn, *args], kwargs, self.config)
                # (its hooks run around the compiled forward, as ``Module.__call__`` runs
                # them: a module with backward hooks is a break of the graph that calls it)
                return _call_with_hooks(fn, functools.partial(
                    _run_forward, forward, fn, self.config), tuple(args), kwargs)
        return fn(*args, **kwargs)


def _run_forward(forward: types.FunctionType, mod: torch.nn.Module, config: Config,
                 *args: Any, **kwargs: Any) -> Any:
    return run_compiled(forward, [mod, *args], kwargs, config)


def has_tensor_in_frame(fn: types.FunctionType, args: list, kwargs: dict) -> bool:
    """Could a call of ``fn`` put anything in a graph: a tensor or module among its
    arguments or the variables it closes over (in lists, tuples, dicts, behind a weak
    reference), or a ``torch`` module among the globals it names? A frame without is not
    captured; it runs as plain Python, so code that asks ``torch.compiler.is_compiling()``
    from it (transformers' ``is_torchdynamo_compiling``) hears False there, as it does in
    PyTorch.

    Mirrors: ``has_tensor_in_frame`` in torch/_dynamo/convert_frame.py, whose ``f_locals``
    hold the closure's cells too. PyTorch's frame hook still sees the frames such a frame
    calls; here they run uncompiled with it, so a wrapper that reaches the model only
    through its closure (an LR scheduler's ``optimizer.step`` wrapper holds a weak
    reference to the optimizer) must count as holding it."""
    for name in fn.__code__.co_names:
        obj = fn.__globals__.get(name)
        if isinstance(obj, types.ModuleType) and (obj is torch or
                                                  obj.__name__.startswith("torch.")):
            return True
    seen: set[int] = set()

    def has_tensor(obj: Any) -> bool:
        if id(obj) in seen:
            return False
        seen.add(id(obj))
        if isinstance(obj, (torch.Tensor, torch.nn.Module, *_HOLDS_PARAMETERS)) or (
                type(obj) is type and issubclass(obj, torch.nn.Module)):
            return True
        if type(obj) in (list, tuple):
            return any(has_tensor(v) for v in obj)
        if type(obj) is dict:
            return any(has_tensor(v) for v in list(obj.values()))
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
            return any(has_tensor(v) for v in obj)
        if type(obj) is weakref.ref:
            return has_tensor(obj())
        return False
    cells = []
    for cell in fn.__closure__ or ():
        with contextlib.suppress(ValueError):          # (an empty cell)
            cells.append(cell.cell_contents)
    return any(has_tensor(v) for v in [*args, *kwargs.values(), *cells])


# torch objects that hold a model's parameters: a frame given one is captured (the optimizer
# step's ``_use_grad`` wrapper gets only ``self``, and must be captured for ``step`` to be)
_HOLDS_PARAMETERS = (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler)


def _notify(kind: str, frame: Frame, result: CaptureResult, entry: CacheEntry | None) -> None:
    for listener in list(_LISTENERS):
        listener(kind, frame, result, entry)


def cache_entries(fn: Callable) -> list[CacheEntry]:
    """Every cache entry compiled for ``fn``'s code (all resume points), in order."""
    fn = getattr(fn, "_orig", fn)
    if isinstance(fn, torch.nn.Module):
        fn = type(fn).forward
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    found = []
    for (code, _), cache in _CACHES.items():
        if code is fn.__code__:
            found += [e for ip in sorted(cache.entries) for e in cache.entries[ip]]
    return found
