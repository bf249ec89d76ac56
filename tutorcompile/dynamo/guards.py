"""Guards: the assumptions a captured graph makes, checked before every reuse.

A graph captured for ``f(x)`` with ``x`` a 2×3 float32 CPU tensor is only valid while those
facts hold: a new call with a 4×3 tensor, a float64 tensor, a changed global or a module put
in eval mode must not reuse it. While tracing, every value the translator looks at installs
guards through :class:`GuardBuilder`; at the end they are compiled into one Python function
(:class:`CheckFunction`) that the cache runs on each call. Guards print as the Python they
are, in the spirit of ``TORCH_LOGS=guards`` and depyf::

    check_tensor(L['x'], torch.Tensor, torch.float32, device='cpu', size=[2, 3], ...)
    type(L['n']) is int and L['n'] == 3
    L['self'] is ___obj_0              # Net instance
    L['self'].training == True
    torch.is_grad_enabled() == True

The check function (:class:`CheckFunction`) tests the cheapest guards first and reads each
shared source once. The tensors whose sizes are all static are checked together by one call
of PyTorch's own C++ ``TensorGuards.check`` (dispatch keys, dtype, device, requires_grad,
sizes, strides of every tensor, an order of magnitude faster than the same tests as Python
attribute reads: benchmarks/MEASUREMENTS.md); where it is missing, inline Python tests do
the same.

Guard kinds (PyTorch's names): TENSOR_MATCH, CONSTANT_MATCH, TYPE_MATCH, ID_MATCH,
SEQUENCE_LENGTH, DICT_KEYS (a dict read whole), DICT_CONTAINS (one key of a dict from outside
read: ``'k' in G['REGISTRY']``), GRAD_MODE, AUTOCAST, SHAPE_ENV (symbolic sizes), NOT_SHADOWED,
NO_TENSOR_ALIASING / STORAGE_OVERLAPPING (which tensor inputs share memory, for a graph that
writes one: see :meth:`GuardBuilder.TENSOR_ALIASING`).

Mirrors: torch/_dynamo/guards.py (``GuardBuilder``, ``CheckFunctionManager``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.overrides
import torch.utils._device

from ..amp import AUTOCAST_DEVICES, autocast_state
from ..fx import exec_generated
from ..fx.aliasing import alias_groups, no_two_share, storage_pattern
from .source import KEYS, ObjectSource, Source, is_literal

_TENSOR_TYPES = {torch.Tensor: "torch.Tensor", torch.nn.Parameter: "torch.nn.Parameter"}


def check_tensor(t: Any, tensor_type: type[torch.Tensor], dtype: torch.dtype, device: str,
                 size: list, stride: list | None, requires_grad: bool,
                 contiguous: bool | None = None) -> bool:
    """TENSOR_MATCH: ``t`` has exactly the properties the graph was traced with.

    ``None`` in ``size`` marks a dynamic dimension: any size of at least 2 (sizes 0 and 1
    are specialised, as in PyTorch, because broadcasting treats them differently).
    """
    # the common case first, inline: every cache hit runs this once per tensor input
    if type(t) is not tensor_type or t.dtype != dtype or t.requires_grad != requires_grad:
        return False
    if stride is not None:
        return (t.size() == size and t.stride() == stride and str(t.device) == device)
    return explain_tensor_mismatch(t, tensor_type, dtype, device, size, stride, requires_grad,
                                   contiguous) is None


def explain_tensor_mismatch(t, tensor_type, dtype, device, size, stride, requires_grad,
                            contiguous=None) -> str | None:
    """Why ``t`` fails TENSOR_MATCH (None when it passes)."""
    if type(t) is not tensor_type:
        return f"type: expected {tensor_type.__name__}, got {type(t).__name__}"
    if t.dtype != dtype:
        return f"dtype: expected {dtype}, got {t.dtype}"
    if str(t.device) != device:
        return f"device: expected {device}, got {t.device}"
    if t.requires_grad != requires_grad:
        return f"requires_grad: expected {requires_grad}, got {t.requires_grad}"
    actual = t.size()
    if len(actual) != len(size):
        return f"rank: expected {len(size)} dims, got {len(actual)}"
    for dim, (a, e) in enumerate(zip(actual, size)):
        if e is None:
            if a < 2:
                return f"size of dynamic dim {dim}: expected >= 2, got {a}"
        elif a != e:
            return f"size mismatch at dim {dim}: expected {e}, got {a}"
    if stride is not None and tuple(t.stride()) != tuple(stride):
        return f"stride: expected {list(stride)}, got {list(t.stride())}"
    if contiguous is not None and t.is_contiguous() != contiguous:
        return f"contiguity: expected {contiguous}, got {t.is_contiguous()}"
    return None


def user_function_modes() -> list:
    """The torch function modes a user pushed, innermost last -- not the default-device mode
    ``torch.set_default_device`` keeps on the stack for the rest of a program, under which
    capture traces factory calls like every other call."""
    return [m for m in torch.overrides._get_current_function_mode_stack()
            if not isinstance(m, torch.utils._device.DeviceContext)]


@dataclass
class Guard:
    """One assumption: a Python boolean expression, its kind, and a note for people."""
    kind: str
    expr: str
    source: Source | None = None
    comment: str = ""
    # TENSOR_MATCH keeps its arguments so a failure can say *which* property changed
    tensor_args: tuple | None = None
    # the same test, cheaper, for the compiled check function ({v}: the source's value)
    fast: str | None = None
    # a static TENSOR_MATCH that the batched C++ check covers: only the Python type is
    # left to test here ({v}: the source's value)
    batched: str | None = None
    # a guard over several sources (TENSOR_ALIASING): they are read from the locals the
    # check function already bound, not walked again from ``L``
    sources: tuple = ()

    def __str__(self) -> str:
        return f"{self.expr}  # {self.comment}" if self.comment else self.expr


class GuardBuilder:
    """Collects guards while tracing; ``build()`` compiles them into a CheckFunction."""

    def __init__(self):
        self.guards: list[Guard] = []
        self._exprs: set[str] = set()
        self.env: dict[str, Any] = {"torch": torch, "check_tensor": check_tensor, "math": math,
                                    "K": KEYS}
        self._bound: dict[int, str] = {}
        self._devices: dict[str, str] = {}
        # static tensors' example values, until build() hands them to TensorGuards (then
        # forgotten: a guard must not keep the user's tensors alive)
        self._tensor_values: dict[str, torch.Tensor] = {}
        self._hookless: list[str] = []      # sources of modules inlined without hooks

    def add(self, kind: str, expr: str, source: Source | None = None, comment: str = "",
            tensor_args: tuple | None = None, fast: str | None = None,
            sources: tuple = ()) -> None:
        if expr not in self._exprs:
            self._exprs.add(expr)
            self.guards.append(Guard(kind, expr, source, comment, tensor_args, fast,
                                     sources=sources))

    def bind(self, obj: Any, hint: str) -> str:
        """A stable name for ``obj`` inside guard expressions (``___obj_0``)."""
        if id(obj) not in self._bound:
            safe = "".join(c if c.isalnum() else "_" for c in hint)
            name = f"___{safe}_{len(self._bound)}"
            self.env[name] = obj
            self._bound[id(obj)] = name
        return self._bound[id(obj)]

    def literal_device(self, device: torch.device) -> str:
        """One bound name per distinct device (``t.device`` is a new object per read)."""
        name = self._devices.get(str(device))
        if name is None:  # its own numbering: the names of other bound objects stay put
            name = self._devices[str(device)] = f"___device_{len(self._devices)}"
            self.env[name] = torch.device(str(device))
        return name

    # --- guard kinds --------------------------------------------------------------------
    def TENSOR_MATCH(self, source: Source, value: torch.Tensor,
                     dynamic_dims: frozenset[int] = frozenset()) -> None:
        ttype = type(value)
        tname = _TENSOR_TYPES.get(ttype) or self.bind(ttype, ttype.__name__)
        sizes = [None if d in dynamic_dims else s for d, s in enumerate(value.shape)]
        size = tuple(sizes) if not dynamic_dims else sizes
        stride = None if dynamic_dims else tuple(value.stride())
        contiguous = value.is_contiguous() if dynamic_dims else None
        extra = "" if contiguous is None else f", contiguous={contiguous}"
        expr = (f"check_tensor({source.name()}, {tname}, {value.dtype}, "
                f"device={str(value.device)!r}, size={size}, stride={stride}, "
                f"requires_grad={value.requires_grad}{extra})")
        comment = ("dims " + ", ".join(map(str, sorted(dynamic_dims))) + " dynamic (>= 2)"
                   if dynamic_dims else "")
        # inline: attribute reads, no Python call per tensor
        fast = (f"type({{v}}) is {tname} and {{v}}.dtype is {value.dtype} and "
                f"{{v}}.requires_grad is {value.requires_grad} and ")
        if stride is not None:
            fast += f"{{v}}.size() == {size} and {{v}}.stride() == {stride} and "
        else:   # each dim on its own: a dynamic one is at least 2, the others exact
            fast += f"{{v}}.dim() == {len(size)} and " + "".join(
                f"{{v}}.size({d}) >= 2 and " if s is None else f"{{v}}.size({d}) == {s} and "
                for d, s in enumerate(size)) + f"{{v}}.is_contiguous() is {contiguous} and "
        fast += f"{{v}}.device == {self.literal_device(value.device)}"
        self.add("TENSOR_MATCH", expr, source, comment,
                 (ttype, value.dtype, str(value.device), size, stride, value.requires_grad,
                  contiguous), fast)
        if stride is not None and ttype in _TENSOR_TYPES and expr not in self._tensor_values:
            self._tensor_values[expr] = value

    def literal(self, value: Any) -> str:
        """``value`` written into guard source: a Python literal only for the exact builtin
        types whose repr *is* that literal (``3``, ``'relu'``, ``True``, ``None``); any other
        object (an enum member, a str subclass, a dtype) is bound by name and compared."""
        t = type(value)
        if is_literal(value) and t is not tuple:
            return repr(value)
        if t in (tuple, list):
            inner = ", ".join(self.literal(v) for v in value)
            if t is list:
                return f"[{inner}]"
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return self.bind(value, _hint(value) if not isinstance(value, (str, int, float))
                         else t.__name__)

    def CONSTANT_MATCH(self, source: Source, value: Any) -> None:
        name = source.name()
        if value is None or value is Ellipsis or value is NotImplemented:
            self.add("CONSTANT_MATCH", f"{name} is {self.literal(value)}", source)
        elif isinstance(value, (torch.dtype, torch.device)):
            self.add("CONSTANT_MATCH", f"{name} == {self.bind(value, str(value))}", source,
                     str(value))
        else:
            tname = type(value).__name__
            if type(value) not in (bool, int, float, str, bytes, complex):
                tname = self.bind(type(value), tname)
            literal = self.literal(value)
            # True and False are singletons: one identity test says both type and value;
            # another constant is read once (a config's attribute may be a Python
            # ``__getattribute__`` call: transformers' are)
            fast = f"{{v}} is {value}" if type(value) is bool else \
                f"type(___c := {{v}}) is {tname} and ___c == " + \
                literal.replace("{", "{{").replace("}", "}}")
            self.add("CONSTANT_MATCH", f"type({name}) is {tname} and {name} == {literal}",
                     source, fast=fast)

    def TYPE_MATCH(self, source: Source, value: Any) -> None:
        t = type(value)
        tname = t.__name__ if t in (list, tuple, dict) else self.bind(t, t.__name__)
        self.add("TYPE_MATCH", f"type({source.name()}) is {tname}", source)

    def ID_MATCH(self, source: Source, value: Any, what: str = "") -> None:
        if isinstance(source, ObjectSource) and source.value is value:
            return  # the very object: nothing to check
        what = what or _describe(value)
        self.add("ID_MATCH", f"{source.name()} is {self.bind(value, _hint(value))}", source,
                 what)

    def SEQUENCE_LENGTH(self, source: Source, value: Any) -> None:
        self.TYPE_MATCH(source, value)
        self.add("SEQUENCE_LENGTH", f"len({source.name()}) == {len(value)}", source)

    def DICT_KEYS(self, source: Source, value: dict) -> None:
        self.TYPE_MATCH(source, value)
        self.add("DICT_KEYS", f"list({source.name()}.keys()) == "
                 f"{self.literal(list(value.keys()))}", source)

    def CALL_RESULT(self, fn: Any, args: tuple, kwargs: dict, value: Any) -> None:
        """``fn(*args, **kwargs)`` on constants still gives ``value``: a query of global state
        (``torch.are_deterministic_algorithms_enabled()``) whose answer the graph was built
        on."""
        name = self.bind(fn, getattr(fn, "__name__", "fn"))
        call = f"{name}(*{self.literal(tuple(args))}" + (
            f", **{self.literal(dict(kwargs))})" if kwargs else ")")
        self.add("CALL_RESULT", f"{call} == {self.literal(value)}", comment="global state")

    def NOT_IN_DICT(self, source: Source, name: str) -> None:
        """The object at ``source`` has no instance attribute ``name`` (its class's holds)."""
        self.add("NOT_IN_DICT", f"{name!r} not in {source.name()}.__dict__", source,
                 fast=f"{name!r} not in {{v}}.__dict__")

    def NO_HOOKS(self, source: Source) -> None:
        """The module at ``source`` (whose call was inlined as its ``forward``) still has no
        hooks, and no global module hooks exist: a hook registered after the capture must
        run (a recompile meets it). One guard for all modules of the frame, see
        :meth:`build`."""
        self._hookless.append(source.name())

    def SAME_HOOKS(self, source: Source, module: torch.nn.Module) -> None:
        """The module at ``source`` has the very hooks its inlined call ran, under the same
        keys (and so do the global dicts): a hook removed or added since -- which leaves
        the handle count alone when removed -- recompiles."""
        self.add("SAME_HOOKS", f"{self.bind(hook_state, 'hook_state')}({source.name()}) == "
                 f"{self.bind(hook_state(module), 'hooks_seen')}",
                 comment="the module hooks the graph ran")

    def GRAD_MODE(self) -> None:
        self.add("GRAD_MODE", f"torch.is_grad_enabled() == {torch.is_grad_enabled()}",
                 comment="global state")

    def FUNCTION_MODES(self) -> None:
        """No torch function mode a user pushed is active (``with MyMode():`` around the
        call): the graph was traced with none, and a mode changes what each torch call
        computes -- its ``__torch_function__`` runs instead. One C call when there is none."""
        self.add("FUNCTION_MODES", "not torch._C._len_torch_function_stack() or not "
                 f"{self.bind(user_function_modes, 'user_function_modes')}()",
                 comment="global state")

    def AUTOCAST(self) -> None:
        """The autocast state the graph's casts were made for: off, or on for these devices
        with these dtypes. A graph captured without autocast has no casts, and one captured
        under bfloat16 autocast has bfloat16 casts: neither may run under another state."""
        state = dict(autocast_state())
        if not state:   # (one call: the common case, on every cache hit)
            self.add("AUTOCAST", "not torch._C._is_any_autocast_enabled()",
                     comment="global state")
            return
        self.add("AUTOCAST", " and ".join(
            f"torch.is_autocast_enabled({d!r}) and torch.get_autocast_dtype({d!r}) == "
            f"{state[d]}" if d in state else f"not torch.is_autocast_enabled({d!r})"
            for d in AUTOCAST_DEVICES), comment="global state")

    def SHAPE_ENV(self, expr: str, comment: str = "") -> None:
        self.add("SHAPE_ENV", expr, comment=comment or "symbolic size")

    def NOT_SHADOWED(self, name: str) -> None:
        self.add("NOT_SHADOWED", f"{name!r} not in G", comment=f"builtin {name} not shadowed")

    def TENSOR_ALIASING(self, sources: list[Source], values: list[torch.Tensor]) -> None:
        """Which of the graph's tensor inputs share a storage, and where each starts in it:
        as they did when it was traced. A graph that writes an input is traced, and its
        AOT graphs made, for one pattern: ``a.add_(1); return b * 2`` compiled for ``a``
        and ``b`` apart reads ``b`` before the write or after it as the compiler pleases,
        which is only right while they are apart; compiled for ``b = a.view(6)`` it reads
        the written values. So neither is reused for the other: the same tensor passed
        twice is one input guarded ``L['b'] is L['a']`` (ID_MATCH), and this guard tells
        the rest apart (PyTorch's NO_TENSOR_ALIASING and STORAGE_OVERLAPPING guards).
        A graph that writes no input reads the same values either way and gets none."""
        if len(values) < 2:
            return
        names = ", ".join(s.name() for s in sources)
        pattern = storage_pattern(*values)
        groups = alias_groups(pattern)
        if not groups:
            self.add("NO_TENSOR_ALIASING",
                     f"{self.bind(no_tensor_aliasing, 'no_tensor_aliasing')}({names})",
                     comment="no two tensor inputs share storage", sources=tuple(sources))
            return
        shared = "; ".join(" and ".join(
            sources[i].name() + (f" (offset {pattern[i][1]})" if pattern[i][1] else "")
            for i in g) for g in groups)
        self.add("STORAGE_OVERLAPPING",
                 f"{self.bind(storage_pattern, 'storage_pattern')}({names}) == {pattern!r}",
                 comment=f"share storage: {shared}", sources=tuple(sources))

    def build(self) -> CheckFunction:
        if self._hookless:
            self._add_no_hooks()
        guards, env = list(self.guards), dict(self.env)
        batch = [g for g in _ordered(guards) if g.expr in self._tensor_values]
        if TensorGuards is not None and batch:
            values = [self._tensor_values[g.expr] for g in batch]
            try:
                tensor_guards = TensorGuards(
                    *values, dynamic_dims_sizes=[list(v.size()) for v in values],
                    dynamic_dims_strides=[list(v.stride()) for v in values])
            except (TypeError, RuntimeError):  # another signature: keep the Python tests
                tensor_guards = None
            if tensor_guards is not None and tensor_guards.check(*values):
                env["___check_tensors"] = tensor_guards.check
                for g in batch:
                    tensor_type = (g.tensor_args or (None,))[0]   # (a TENSOR_MATCH's)
                    g.batched = f"type({{v}}) is {_TENSOR_TYPES[tensor_type]}"
        self._tensor_values.clear()
        return CheckFunction(guards, env)

    def _add_no_hooks(self) -> None:
        """Every hook registration makes a ``RemovableHandle``, whose class counts them:
        while the count is the one last seen, no hook was added anywhere (one comparison per
        call); else each module's hook dicts, and the global ones, are looked at -- and, if
        still empty, the new count is the one seen (a hook on some tensor costs one slow
        check, not one per call from then on)."""
        handles = self.bind(torch.utils.hooks.RemovableHandle, "RemovableHandle")
        module = self.bind(torch.nn.modules.module, "nn_module")
        seen = self.bind([torch.utils.hooks.RemovableHandle.next_id], "hook_count_seen")
        renew = self.bind(_hook_count_seen, "hook_count_seen_if")
        modules = ", ".join(dict.fromkeys(self._hookless))
        dicts = " or ".join(f"m.{d}" for d in _MODULE_HOOKS)
        global_dicts = " or ".join(f"{module}._global{d}" for d in _MODULE_HOOKS)
        self.add("NO_HOOKS", f"{handles}.next_id == {seen}[0] or {renew}({seen}, not ("
                 f"{global_dicts} or any({dicts} for m in ({modules},))))",
                 comment="no module hooks registered since")
        self._hookless = []


def no_tensor_aliasing(*tensors: torch.Tensor) -> bool:
    """No two of ``tensors`` share a storage (NO_TENSOR_ALIASING: one set, one read of each
    tensor's storage)."""
    return no_two_share(tensors)


def _hook_count_seen(seen: list[int], no_hooks: bool) -> bool:
    """``no_hooks``; if so, remember the hook-handle count as seen (see NO_HOOKS)."""
    if no_hooks:
        seen[0] = torch.utils.hooks.RemovableHandle.next_id
    return no_hooks


_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                 "_backward_pre_hooks")


def hook_state(module: torch.nn.Module) -> tuple:
    """The hooks that run when ``module`` is called, as (key, identity) pairs per dict: its
    own and the global ones."""
    glob = torch.nn.modules.module
    return tuple(tuple((k, id(h)) for k, h in d.items())
                 for name in _MODULE_HOOKS
                 for d in (getattr(module, name), getattr(glob, "_global" + name)))


TensorGuards: Any
try:  # PyTorch's C++ check of many tensors at once (what Dynamo used before guard trees)
    from torch._C._dynamo.guards import TensorGuards
except ImportError:  # pragma: no cover -- every supported torch has it
    TensorGuards = None

_COST = {"TENSOR_MATCH": 2, "NO_TENSOR_ALIASING": 2, "STORAGE_OVERLAPPING": 2, "SHAPE_ENV": 3}
"""Order of guards in the check function: identity, type, constant and global-state tests
(one comparison each) first, then tensors, then symbolic sizes; a miss usually fails early."""


class CheckFunction:
    """All guards of one cache entry compiled into a single Python function.

    The function tests the cheapest guards first, reads each source that several guards
    share (``L['self']._modules['0']``) once into a local, and tests a tensor with inline
    attribute reads (``Guard.fast``) rather than a call -- the spirit of PyTorch's guard
    manager tree, in Python. ``str(check)`` still lists the guards as written."""

    def __init__(self, guards: list[Guard], env: dict[str, Any]):
        self.guards = guards
        self.env = env
        self.source = _check_source(guards)
        # ``fn(L, G, B, S)`` is the check itself (the cache-hit path calls it directly); a
        # source that no longer resolves fails it (``except Exception: return False``)
        self.fn = exec_generated(self.source, "guards", dict(env))["___check"]

    def __call__(self, L: dict, G: dict, B: dict, S: list) -> bool:
        return self.fn(L, G, B, S)

    def with_fetch(self, sources: list[Source], scopes: dict[str, Any]) -> Callable:
        """The check and the fetch of a cache hit's graph inputs as one function:
        ``fn(L, G, B, S)`` gives the tuple of the inputs' values when every guard passes,
        else None. The guards have already read each input into a local (a tensor's
        TENSOR_MATCH binds it), so the fetch is a tuple of locals: no second walk of
        ``L['self']._modules[...]._parameters[...]`` per input per call, and one Python
        call fewer."""
        source = _check_source(self.guards, fetch=sources)
        return exec_generated(source, "guards and graph inputs",
                              {**self.env, **scopes})["___check_and_fetch"]

    def failure(self, L: dict, G: dict, B: dict, S: list) -> str | None:
        """The first failing guard and why, for the recompile log (None if all pass)."""
        scope = dict(self.env, L=L, G=G, B=B, S=S)
        for g in self.guards:
            try:
                ok = eval(g.expr, scope)  # noqa: S307 (our own guard text)
            except Exception as e:
                return f"{g.expr}: raised {type(e).__name__}: {e}"
            if not ok:
                if g.kind == "TENSOR_MATCH" and g.tensor_args is not None \
                        and g.source is not None:
                    why = explain_tensor_mismatch(g.source.get(scope), *g.tensor_args)
                    return f"tensor {g.source.name()} {why}"
                return f"{g.expr} is False"
        batched = [(g, g.source) for g in self.guards if g.batched and g.source is not None]
        if batched and "___check_tensors" in self.env:
            try:
                values = [source.get(scope) for _, source in batched]
                if not self.env["___check_tensors"](*values):
                    # each passes alone: TensorGuards also refuses one tensor given twice
                    # (a graph traced for two inputs is not reused for ``f(x, x)``)
                    return "one tensor passed as two inputs: " + ", ".join(
                        source.name() for (_, source), v in zip(batched, values)
                        if sum(w is v for w in values) > 1)
            except Exception:  # noqa: BLE001 -- the reason is only for the log
                pass
        return None

    def failing_tensors(self, L, G, B, S) -> list[tuple[Guard, Any]]:
        """The TENSOR_MATCH guards that failed only because of sizes, with the new values
        (every one: ``f(x, w)`` called with both resized marks both dynamic at once)."""
        scope = dict(self.env, L=L, G=G, B=B, S=S)
        failing = []
        for g in self.guards:
            if g.kind != "TENSOR_MATCH" or g.tensor_args is None or g.source is None:
                continue
            try:
                value = g.source.get(scope)
            except Exception:
                continue
            why = explain_tensor_mismatch(value, *g.tensor_args)
            if why is not None and why.startswith(("size mismatch", "stride")):
                failing.append((g, value))
        return failing

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.guards)

    def __len__(self) -> int:
        return len(self.guards)


def _ordered(guards: list[Guard]) -> list[Guard]:
    return sorted(guards, key=lambda g: _COST.get(g.kind, 0))


def _chain(source: Source | None) -> list[str]:
    """The names of ``source`` and the sources it is read through, outermost base first."""
    chain = []
    while source is not None:
        chain.append(source.name())
        source = getattr(source, "base", None)
    return chain[::-1]


def _check_source(guards: list[Guard], fetch: list[Source] | None = None) -> str:
    """``def ___check(L, G, B, S)``: one ``if not (...): return False`` per guard, cheapest
    first, each shared source bound to a local just before its first use; the batched
    tensors in one ``___check_tensors(...)`` after the last of them.

    With ``fetch`` (the graph inputs' sources): ``def ___check_and_fetch(L, G, B, S)``,
    which returns None where the check returns False, and the inputs' values (the locals
    the guards read them into) where it returns True."""
    ordered = _ordered(guards)
    uses: dict[str, int] = {}
    chains = []
    for g in ordered:
        chain = _chain(g.source) if not g.sources else list(dict.fromkeys(
            name for s in g.sources for name in _chain(s)))
        chains.append(chain)
        for name in chain:
            uses[name] = uses.get(name, 0) + 1
    for source in fetch or ():        # an input read by a guard too: bind it to a local
        name = source.name()
        uses[name] = uses.get(name, 0) + 1
    local: dict[str, str] = {}
    lines = [f"def ___check{'_and_fetch' if fetch is not None else ''}(L, G, B, S):",
             "  try:"]
    batched = [g for g in ordered if g.batched]
    chain_of = {id(g): chain for g, chain in zip(ordered, chains)}
    for g, chain in zip(ordered, chains):
        for name in chain:
            if name not in local and (uses[name] > 1 or (
                    g.kind == "TENSOR_MATCH" and g.fast and name == chain[-1])):
                lines.append(f"    ___v{len(local)} = {_substitute(name, chain, local)}")
                local[name] = f"___v{len(local)}"
        if g.batched and chain:
            expr = g.batched.format(v=_substitute(chain[-1], chain, local))
        elif g.fast and chain:
            expr = g.fast.format(v=_substitute(chain[-1], chain, local))
        else:
            expr = _substitute(g.expr, chain, local)
        lines.append(f"    if not ({expr}):")
        lines.append("        return False")
        if batched and g is batched[-1]:
            args = ", ".join(_substitute(str(b.source and b.source.name()), chain_of[id(b)],
                                         local) for b in batched)   # (each has a source)
            lines.append(f"    if not ___check_tensors({args}):")
            lines.append("        return False")
    if fetch is not None:
        lines = [line.replace("return False", "return None") for line in lines]
        values = "".join(f"{_substitute(src.name(), _chain(src), local)}, " for src in fetch)
        lines.append(f"    return ({values})")
    elif len(lines) == 2:         # no guard at all
        lines.append("    pass")
    failed = "None" if fetch is not None else "False"
    lines += ["  except Exception:  # a source that no longer resolves", f"    return {failed}"]
    if fetch is None:
        lines.append("  return True")
    return "\n".join(lines) + "\n"


def _substitute(expr: str, chain: list[str], local: dict[str, str]) -> str:
    """``expr`` with the bound names of its guard's source ``chain`` (longest first)
    replaced by their locals. Only the guard's own chain: trying every bound name on every
    guard made building the check quadratic (a network with 2,700 guards spent minutes in
    ``re``). A source the guard reads outside its chain stays as it is -- a local is only a
    cache of the same read."""
    for name in sorted((n for n in chain if n in local), key=len, reverse=True):
        expr = _name_pattern(name).sub(local[name], expr)
    return expr


@functools.lru_cache(maxsize=4096)
def _name_pattern(name: str) -> re.Pattern:
    return re.compile(re.escape(name) + r"(?![\w])")


def _hint(value: Any) -> str:
    if isinstance(value, type(torch)):
        return value.__name__.split(".")[-1]
    name = getattr(value, "__name__", None)
    if isinstance(name, str):
        return name
    return type(value).__name__


def _describe(value: Any) -> str:
    if isinstance(value, type(torch)):
        return f"module {value.__name__}"
    if isinstance(value, type):
        return f"class {value.__qualname__}"
    if callable(value) and hasattr(value, "__qualname__") and not isinstance(
            value, torch.nn.Module):
        return f"function {value.__qualname__}"
    return f"{type(value).__name__} instance"
