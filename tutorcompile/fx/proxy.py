"""Proxies: stand-in values that record what is done to them.

Symbolic tracing runs the user's ``forward`` once, but with a :class:`Proxy` in place of every
tensor input. A Proxy holds no data; it holds a graph :class:`~tutorcompile.fx.Node`. Every
operation applied to it -- ``x + 1``, ``x.view(4, -1)``, ``torch.relu(x)``,
``F.softmax(x, -1)`` -- is appended to the graph as a new node, and returns a new Proxy for
that node's result. When ``forward`` returns, the graph *is* the program.

Three doors let operations in:

* **Python operators** (``+``, ``@``, ``<``, ``~``, ``x[i]``) are the magic methods defined
  below; each records ``call_function`` with the matching ``operator.*`` function.
* **Attributes and methods** go through ``__getattr__``, which returns an
  :class:`Attribute`. Calling it records ``call_method`` (``x.view(...)``); using it as a
  value records ``getattr`` (``x.shape``, ``x.T``). The node is created lazily, so that
  ``x.view`` does not leave a stray ``getattr`` node behind.
* **torch functions** (``torch.cat``, ``torch.nn.functional.relu``, ...) are not methods of
  the Proxy at all. PyTorch's ``__torch_function__`` protocol notices an argument whose type
  defines ``__torch_function__`` and hands it the call instead; we record the call.

What a Proxy *cannot* do is produce a concrete Python value: ``bool(x)`` (an ``if`` on a
tensor), ``len(x)``, ``int(x)``, ``x.item()``. The answer depends on data the tracer does not
have, so these raise :class:`TraceError`, naming the construct and the user's line.

Mirrors: torch/fx/proxy.py.
"""

from __future__ import annotations

import dis
import operator
import os
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from ..errors import TutorcompileError
from .node import Node

if TYPE_CHECKING:  # pragma: no cover
    from .tracer import Tracer


class TraceError(TutorcompileError):
    """Symbolic tracing met a construct that needs a concrete value it does not have.

    ``construct`` names what was attempted (``"if"``, ``"len()"``, ...); ``source`` is the
    user's line as ``"file.py:12 in forward: if x.sum() > 0:"`` (or None if not found).
    """

    def __init__(self, message: str, construct: str = "", source: str | None = None):
        super().__init__(message)
        self.construct = construct
        self.source = source


# ---------------------------------------------------------------------------------------
# Finding the user's line: the first stack frame outside tutorcompile and torch
# ---------------------------------------------------------------------------------------

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_SKIP_FILES = ("<tutorcompile.fx generated", )


def _is_library_file(filename: str) -> bool:
    if filename.startswith(_SKIP_FILES):
        return True
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR + os.sep) or path.startswith(_TORCH_DIR + os.sep)


def user_frame() -> Any:
    """The innermost frame of the user's code (not tutorcompile's, not torch's), or None."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and _is_library_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def _display_filename(filename: str) -> str:
    """A short, stable file name: ``model.py``, or ``Cell In[7]`` inside Jupyter."""
    if "ipykernel_" in filename or filename.startswith("<ipython-input"):
        try:  # IPython maps its per-cell file names to execution counts
            from IPython import get_ipython
            shell = get_ipython()
            count = shell.compile._filename_map.get(filename) if shell else None
            if count is not None:
                return f"Cell In[{count}]"
        except (ImportError, AttributeError):
            pass
    return os.path.basename(filename)


def format_frame(frame: Any) -> str | None:
    """``"model.py:12 in forward: y = self.fc(x)"`` for a frame (None for no frame)."""
    if frame is None:
        return None
    import linecache
    code = frame.f_code
    line = linecache.getline(code.co_filename, frame.f_lineno).strip()
    where = f"{_display_filename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"
    return f"{where}: {line}" if line else where


def user_source() -> str | None:
    """The user's current source line, formatted by :func:`format_frame`."""
    return format_frame(user_frame())


def _current_instruction(frame: Any) -> dis.Instruction | None:
    if frame is None:
        return None
    for inst in dis.get_instructions(frame.f_code):
        if inst.offset == frame.f_lasti:
            return inst
    return None


_ADVICE = ("To trace it anyway: pass the value as `concrete_args={...}` to specialise the trace "
           "to it, move this code out of the traced function, or capture with "
           "`tutorcompile.compile` (Dynamo, stage 3), which runs the Python and splits the graph "
           "where a concrete value is needed.")


def trace_error(construct: str, why: str, node: Node | None = None) -> TraceError:
    """Build the TraceError for ``construct``, pointing at the user's line."""
    source = user_source()
    value = f" `{node.name}`" if node is not None else ""
    where = f"\n  at {source}" if source else ""
    message = (f"symbolic tracing cannot evaluate {construct} on the Proxy{value}: {why}."
               f"{where}\n"
               f"{_ADVICE}")
    return TraceError(message, construct, source)


# ---------------------------------------------------------------------------------------
# The Proxy
# ---------------------------------------------------------------------------------------

_UNKNOWN = "its value is only known when the graph runs, and tracing records the graph " \
           "without running it"


class Proxy:
    """A traced value: wraps a graph node and records every operation applied to it."""

    def __init__(self, node: Node, tracer: Tracer):
        self.node = node
        self.tracer = tracer

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    __hash__ = object.__hash__  # ``__eq__`` records a node, so hashing must stay by identity

    # --- attributes and methods ---------------------------------------------------------
    def __getattr__(self, name: str) -> Attribute:
        if name.startswith(("__", "_ipython", "_repr_")):
            # copy, pickle, numpy and IPython probe for these; a Proxy has none of them
            raise AttributeError(name)
        if name in _CONCRETE_METHODS:
            raise trace_error(f"`.{name}()`", f"it turns a tensor into a Python value, and "
                              f"{_UNKNOWN}", self.node)
        return Attribute(self, name)

    # --- things that need a concrete value ----------------------------------------------
    def __bool__(self) -> bool:
        inst = _current_instruction(user_frame())
        opname = inst.opname if inst is not None else ""
        if ("JUMP" in opname and "IF_" in opname) or opname == "TO_BOOL":
            construct = "an `if`/`while` condition (or `and`/`or`)"
        elif opname == "UNARY_NOT":
            construct = "`not`"
        else:
            construct = "`bool()`"
        raise trace_error(construct, f"which branch runs depends on data, and {_UNKNOWN}",
                          self.node)

    def __len__(self) -> int:
        raise trace_error("`len()`", "the length of a traced value is not a Python int "
                          "during tracing; use `x.size(0)` or `x.shape[0]` to keep it in the "
                          "graph", self.node)

    def __iter__(self):
        frame = user_frame()
        inst = _current_instruction(frame)
        if inst is not None and inst.opname == "UNPACK_SEQUENCE":
            # `a, b = x.shape`: the target count says how many items to take
            return iter([self[i] for i in range(inst.argval)])
        raise trace_error("iteration (`for ... in`, `list()`, `*x`)",
                          "the number of items is unknown while tracing (only unpacking into "
                          "a fixed number of names, `a, b = x.shape`, can be traced)", self.node)

    def _needs_number(self, kind: str) -> Any:
        raise trace_error(f"`{kind}()` (a traced value used where Python needs a concrete "
                          "number, e.g. `range(n)`, a shape in Python arithmetic, or a list "
                          "index)", _UNKNOWN, self.node)

    def __index__(self) -> int:
        return self._needs_number("index")

    def __int__(self) -> int:
        return self._needs_number("int")

    def __float__(self) -> float:
        return self._needs_number("float")

    def __complex__(self) -> complex:
        return self._needs_number("complex")

    def __contains__(self, item: Any) -> bool:
        raise trace_error("`in`", _UNKNOWN, self.node)

    # --- item assignment ----------------------------------------------------------------
    def __setitem__(self, index: Any, value: Any) -> None:
        self.tracer.create_proxy("call_function", operator.setitem, (self, index, value), {})

    # --- torch functions ----------------------------------------------------------------
    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        tracer = _find_tracer((args, kwargs))
        if tracer is None:  # pragma: no cover - torch only calls us when a Proxy is present
            return NotImplemented
        name = getattr(func, "__name__", "")
        if torch.overrides.is_tensor_method_or_property(func):
            # A Tensor method reached with a real tensor as ``self`` and a Proxy argument,
            # e.g. ``self.buffer + x`` → Tensor.__add__(buffer, x). Dunders become the
            # Python operator they spell; other methods stay method calls.
            if name in _DUNDER_TO_OPERATOR:
                return tracer.create_proxy("call_function", _DUNDER_TO_OPERATOR[name],
                                           args, kwargs)
            return tracer.create_proxy("call_method", name, args, kwargs)
        return tracer.create_proxy("call_function", func, args, kwargs)


class Attribute(Proxy):
    """``proxy.name``: becomes ``call_method`` if called, ``getattr`` if used as a value."""

    def __init__(self, root: Proxy, attr: str):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node: Node | None = None

    @property
    def node(self) -> Node:  # type: ignore[override]
        # Created on first use, so `x.view(...)` records one call_method and no getattr.
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args: Any, **kwargs: Any) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)

    def __repr__(self) -> str:
        return f"Attribute({self.root!r}.{self.attr})"


# Methods that hand back Python data; they cannot be traced.
_CONCRETE_METHODS = {"item", "tolist", "numpy", "data_ptr"}


def _find_tracer(a: Any) -> Tracer | None:
    found: list[Tracer] = []

    def visit(x: Any) -> None:
        if isinstance(x, Proxy):
            found.append(x.tracer)
        elif isinstance(x, (tuple, list)):
            for y in x:
                visit(y)
        elif isinstance(x, dict):
            for y in x.values():
                visit(y)
        elif isinstance(x, slice):
            visit((x.start, x.stop, x.step))
    visit(a)
    return found[0] if found else None


# ---------------------------------------------------------------------------------------
# Operator overloading: each magic method records the operator.* function it spells
# ---------------------------------------------------------------------------------------

_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
    "pow": operator.pow, "matmul": operator.matmul, "and": operator.and_,
    "or": operator.or_, "xor": operator.xor, "lshift": operator.lshift,
    "rshift": operator.rshift,
}
_COMPARE = {"lt": operator.lt, "le": operator.le, "eq": operator.eq, "ne": operator.ne,
            "gt": operator.gt, "ge": operator.ge}
_UNARY = {"neg": operator.neg, "pos": operator.pos, "invert": operator.invert,
          "abs": operator.abs}

_DUNDER_TO_OPERATOR: dict[str, Any] = {f"__{k}__": v for k, v in {**_BINARY, **_COMPARE,
                                                                   **_UNARY}.items()}
_DUNDER_TO_OPERATOR["__getitem__"] = operator.getitem


def _binary(fn: Any):
    def forward(self: Proxy, other: Any) -> Proxy:
        return self.tracer.create_proxy("call_function", fn, (self, other), {})
    return forward


def _reflected(fn: Any):
    def reflected(self: Proxy, other: Any) -> Proxy:  # ``other <op> self``
        return self.tracer.create_proxy("call_function", fn, (other, self), {})
    return reflected


def _unary(fn: Any):
    def unary(self: Proxy) -> Proxy:
        return self.tracer.create_proxy("call_function", fn, (self,), {})
    return unary


for _name, _fn in _BINARY.items():
    setattr(Proxy, f"__{_name}__", _binary(_fn))
    setattr(Proxy, f"__r{_name}__", _reflected(_fn))
for _name, _fn in _COMPARE.items():
    setattr(Proxy, f"__{_name}__", _binary(_fn))
for _name, _unary_fn in _UNARY.items():
    setattr(Proxy, f"__{_name}__", _unary(_unary_fn))
setattr(Proxy, "__getitem__", _binary(operator.getitem))  # noqa: B010 -- like the loops above
