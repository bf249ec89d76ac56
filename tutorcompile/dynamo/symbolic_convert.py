"""InstructionTranslator: the bytecode VM run on variable trackers, building a graph.

This is the heart of Dynamo. :class:`InstructionTranslator` subclasses the concrete
:class:`~tutorcompile.dynamo.vm.VM` and overrides only its *hooks*: every opcode handler is
shared, but ``binary_op`` on two tensors now adds a ``call_function`` node to a graph instead
of adding numbers, ``call`` on a user function traces *into* it (inlining), ``truth`` of a
tensor raises :class:`~tutorcompile.dynamo.exc.Unsupported` (a graph break), and so on.

Key pieces:

* :class:`~tutorcompile.dynamo.output_graph.OutputGraph` (``output_graph.py``) -- the graph
  under construction: inputs with their sources, one node per torch-level call (run on fake
  tensors), ``node.meta['source']`` naming the user's line.
* :class:`~tutorcompile.dynamo.variables.builder.VariableBuilder` (``variables/builder.py``)
  -- turns a value read from the frame (argument, global, attribute, closure cell) into a
  tracker and installs guards; locals start as lazy variables (``variables/lazy.py``),
  wrapped when first read.
* :meth:`InstructionTranslator.capture` -- runs the top frame one instruction at a time. When
  an instruction raises ``Unsupported`` (maybe deep inside an inlined call), everything that
  instruction did is rolled back and capture stops *before* it: the result is the graph so
  far, the trackers on the stack and in the locals (the continuation) and the reason.

Mirrors: torch/_dynamo/symbolic_convert.py.
"""

from __future__ import annotations

import builtins
import collections
import importlib
import inspect
import linecache
import operator
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import torch

from ..fx.node import Node, map_aggregate
from ..fx.passes.dce_cse import is_random
from . import config, polyfills, trace_rules
from .bytecode import JUMP_OPS, PY
from .exc import TracedException, Unsupported
from .guards import GuardBuilder
from .output_graph import OutputGraph, _as_vt
from .source import (
    AttrSource,
    CellContentsSource,
    GetItemSource,
    GlobalSource,
    LocalSource,
    ObjectSource,
    Source,
    StackSource,
)
from .variables import (
    DELETED,
    AutocastVariable,
    BaseListVariable,
    BuiltinVariable,
    CachedFunctionVariable,
    CellVariable,
    ClosureCellVariable,
    ConstantVariable,
    ConstDictVariable,
    DeferredCallVariable,
    DequeContentsVariable,
    DequeVariable,
    GeneratorVariable,
    GlobalsVariable,
    GradModeVariable,
    IteratorVariable,
    ListIteratorVariable,
    ListVariable,
    NestedUserFunctionVariable,
    NNModuleVariable,
    PartialVariable,
    RegionExitVariable,
    SetVariable,
    SizeVariable,
    SliceVariable,
    SymIntVariable,
    TensorVariable,
    TupleVariable,
    UserDefinedClassVariable,
    UserDefinedObjectVariable,
    UserFunctionVariable,
    UserMethodVariable,
    VariableTracker,
    is_constant_value,
    refill_deque,
    suspended_generator,
    wrap_constant_result,
)
from .variables.builder import VariableBuilder, is_typing_form
from .variables.callables import DataclassVariable, user_object_text
from .variables.lazy import LazyVariable, realize
from .variables.ndarray import (
    BINARY_OPERATORS as NDARRAY_OPERATORS,
)
from .variables.ndarray import (
    NumpyNdarrayVariable,
    ndarray_binary_op,
    ndarray_call,
    ndarray_getitem,
)
from .variables.torch import in_torch, traced_like_user_code
from .vm import _RETURN, CO_GENERATOR_LIKE, NULL, VM, Frame, bind_arguments, chain_context

_SYMBOLS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.floordiv: "//",
            operator.mod: "%", operator.lt: "<", operator.le: "<=", operator.gt: ">",
            operator.ge: ">=", operator.eq: "==", operator.ne: "!=", operator.truediv: "/",
            operator.pow: "**"}


@dataclass
class CaptureResult:
    """What one capture produced: a graph and the continuation where it stopped."""
    kind: str  # "return" | "break" | "skip"
    output: OutputGraph | None = None
    guards: GuardBuilder | None = None
    return_value: VariableTracker | None = None
    stack: list = field(default_factory=list)
    locals: dict = field(default_factory=dict)
    break_ip: int | None = None
    reason: str | None = None
    location: tuple[str, int | None, str] | None = None  # filename, line, source text
    in_loop: bool = False
    side_effects: list = field(default_factory=list)  # (object tracker, attribute, value)
    # (a bool-able one-element tensor, the truth the graph assumed): see assume_branch
    assumptions: list = field(default_factory=list)
    # (function, constant arguments) called before the graph runs: see seed_before_graph
    prologue: list = field(default_factory=list)


class InstructionTranslator(VM):
    """Symbolically executes a frame from its current instruction, building a graph.

    ``frame`` is the *concrete* frame (real values), stopped at the instruction where
    capture starts: the function's first instruction or a resume point after a break.
    ``dynamic_dims(source, tensor)`` says which dimensions of an input are symbolic.
    """

    def __init__(self, frame: Frame, dynamic_dims=None, assume: bool = True):
        super().__init__(inline_calls=True, max_depth=config.max_inline_depth)
        self.concrete = frame
        self.assume = assume   # may a branch into a raise be assumed not taken?
        self.assumptions: list[tuple[TensorVariable, bool]] = []
        # the operands of an ``assert a or b`` met so far, by frame (see assume_branch)
        self.pending_or: dict[int, tuple[list[TensorVariable], int, int]] = {}
        self.prologue: list[tuple[Any, tuple]] = []
        self.output = OutputGraph(self)
        self.guards = GuardBuilder()
        self.dynamic_dims: Callable[[Source, Any], frozenset[int]] = \
            dynamic_dims or (lambda source, value: frozenset())
        # values from outside become trackers through the builder (variables/builder.py);
        # its ``wrap_nested`` is bound here too, as every tracker reaches it through ``tx``
        self.builder = VariableBuilder(self)
        self.wrap_nested = self.builder.wrap_nested
        self.frames: list[Frame] = []
        self.journal: dict[int, tuple[VariableTracker, dict]] = {}
        self._scopes: dict[int, str] = {id(frame.globals): "G"}
        # outside objects written to: containers (written back whole), deferred calls,
        # and objects, classes, cells and globals whose writes wait in ``pending``
        self.side_effect_objects: list[Any] = []
        self.grad_stack: list[bool] = []  # grad mode of traced no_grad/enable_grad blocks
        self.inference_regions = 0   # traced ``torch.inference_mode()`` blocks open now
        # the global grad mode a ``torch.set_grad_enabled(mode)`` statement set (None: the
        # mode the frame was entered with); set for real after the graph
        self.global_grad: bool | None = None
        self.autocast_stack: list[tuple] = []  # traced torch.autocast regions, innermost last
        self._globals_written: dict[str, GlobalsVariable] = {}  # by scope label
        self._writes = 0  # see writes_recorded
        # parameters and buffers read as other tensors, by (id(module), name): the
        # functional_call calls being traced, innermost last
        self.reparametrized: list[dict[tuple[int, str], VariableTracker]] = []

    # --- the capture loop -------------------------------------------------------------------
    def capture(self) -> CaptureResult:
        c = self.concrete
        if c.exc_stack:
            return CaptureResult("skip", reason="resuming inside an exception handler")
        root = Frame(c.code, c.globals, {}, c.name)
        root.ip = c.ip
        if c.ip:
            # a resume point can be reached with different locals bound (one side of an
            # ``if`` assigns a name, the other does not): the continuation is only valid for
            # the same set, as a resume function's parameter list is in Dynamo
            self.guards.add("LOCALS_MATCH", f"sorted(L) == {sorted(c.locals)!r}",
                            comment="locals bound at this resume point")
        for name, value in c.locals.items():
            if isinstance(value, types.CellType):
                root.locals[name] = self.builder.closure_cell(value, LocalSource(name))
            else:
                root.locals[name] = LazyVariable(value, LocalSource(name))
        popped = root.instructions[root.ip].opname == "POP_TOP" if c.stack else False
        try:
            # the breaking call's result that the next instruction discards (the grad-mode
            # object ``torch.set_grad_enabled(False)`` returns, as a statement) is never
            # read: left unwrapped, it is guarded on nothing -- an identity guard on an
            # object each call makes anew would fail on every call
            root.stack = [v if v is NULL else LazyVariable(v, StackSource(i))
                          if popped and i == len(c.stack) - 1
                          else self.wrap_nested(v, StackSource(i))
                          for i, v in enumerate(c.stack)]
        except Unsupported as e:  # a value on the rebuilt stack cannot be traced
            return CaptureResult("skip", reason=e.reason,
                                 location=self.location_of(root, root.ip))
        self.frames = [root]
        while True:
            mark = (len(self.output.created), self.builder.mark())
            saved = (root.ip, list(root.stack), dict(root.locals), list(self.grad_stack),
                     list(root.exc_stack), list(self.autocast_stack), self.global_grad,
                     self.inference_regions)
            seeded = len(self.prologue)
            self.journal = {}
            try:
                if self.step(root) is _RETURN:
                    return self._finish(CaptureResult("return",
                                                      return_value=root.return_value))
            except Unsupported as e:
                self._rollback(mark)
                del self.prologue[seeded:]   # the breaking instruction runs them for real
                (root.ip, root.stack, root.locals, self.grad_stack, root.exc_stack,
                 self.autocast_stack, self.global_grad, self.inference_regions) = saved
                self.frames = [root]
                if self.pending_or.get(id(root)):
                    # between the operands of ``assert a or b``, where the trace took ``a``
                    # as false: no resume point says that, so the frame runs uncompiled
                    return CaptureResult("skip", reason=f"{e.reason} (between the operands "
                                         "of `assert a or b`)",
                                         location=e.location)
                if e.raised:
                    # the traced code raised and nothing traced catches it: the frame runs
                    # uncompiled from here, as in PyTorch's Dynamo ("Skipping the function
                    # and falling back to eager"), not from a break just before the raising
                    # call. The prefix was traced where ``torch.compiler.is_compiling()`` is
                    # True, and the exception may be that choice's consequence, one eager
                    # never meets: LongT5 skips building a default attention mask while
                    # compiling, then splits the mask, None, into blocks.
                    return CaptureResult("skip", reason=e.reason,
                                         location=e.location)
                if root.exc_stack or any(isinstance(v, TracedException) for v in root.stack):
                    # inside a handler of an exception the traced code raised: the real frame
                    # has no such exception to resume with, so it runs uncompiled from here
                    return CaptureResult("skip", reason=f"{e.reason} (inside an exception "
                                         "handler)", location=e.location)
                exits = [v.region for v in root.stack if isinstance(v, RegionExitVariable)]
                if len(self.grad_stack) != sum(
                        isinstance(r, GradModeVariable) for r in exits) or len(
                        self.autocast_stack) != sum(isinstance(r, AutocastVariable)
                                                    for r in exits):
                    # inside a grad-mode or autocast region the real frame cannot be put
                    # back in (one entered by a function inlined here): run this part of
                    # the frame uncompiled instead. A region of the frame's own with-block
                    # is entered for real when its exit is rebuilt (RegionExitVariable)
                    return CaptureResult("skip", reason=f"{e.reason} (inside a torch.no_grad"
                                         "/enable_grad or autocast region)")
                if any(_is_with_exit(v) for v in root.stack):
                    # likewise inside a with-block whose __enter__ was traced: the real frame
                    # runs the whole block, __enter__ to __exit__
                    return CaptureResult("skip", reason=f"{e.reason} (inside a with-block)",
                                         location=e.location)
                loc = e.location or self.location_of(root, root.ip)
                gen = suspended_generator([*root.stack, *root.locals.values()])
                if gen is not None:
                    # its state is a frame of ours, half run: the real frame cannot be
                    # given it, so the real frame runs uncompiled from here
                    return CaptureResult("skip", reason=f"{e.reason} (while the generator "
                                         f"{gen.frame.name} is suspended)", location=loc)
                return self._finish(CaptureResult(
                    "break", stack=root.stack, locals=root.locals, break_ip=root.ip,
                    reason=e.reason, location=loc, in_loop=_in_loop(root, root.ip)))

    def _finish(self, result: CaptureResult) -> CaptureResult:
        result.output, result.guards = self.output, self.guards
        nodes = set(self.output.graph.nodes)   # (a rolled-back inline took its own along)
        result.assumptions = [(c, e) for c, e in self.assumptions if c.node in nodes]
        result.prologue = list(self.prologue)
        # attribute writes to objects from outside, replayed in order after the graph
        for vt in self.side_effect_objects:
            if isinstance(vt, DeferredCallVariable):
                result.side_effects.append((vt, None, vt))  # made after the graph
            elif isinstance(vt, (ListVariable, ConstDictVariable, SetVariable)):
                if getattr(vt, "mutated", False):
                    result.side_effects.append((vt, None, vt))  # new contents, same object
            elif not vt.fresh:
                result.side_effects += [(vt, name, value) for name, value in vt.pending.items()]
        if self.global_grad is not None:
            # a ``torch.set_grad_enabled(mode)`` statement: the mode the program leaves
            set_mode = DeferredCallVariable(self.builder.wrap(torch._C._set_grad_enabled, None),
                                            [ConstantVariable(self.global_grad)], {})
            result.side_effects.append((set_mode, None, set_mode))
        if self.output.op_count:
            self.guards.GRAD_MODE()
            self.guards.AUTOCAST()
            self.guards.FUNCTION_MODES()
        return result

    def _rollback(self, mark: tuple[int, int]) -> None:
        for vt, state in self.journal.values():
            vt.__dict__.update(state)
        self.journal = {}
        self.output.rollback(mark[0])
        self.builder.rollback(mark[1])

    @property
    def writes_recorded(self) -> int:
        """How many writes (mutations, side effects) tracing has recorded so far."""
        return self._writes

    def record_mutation(self, vt: VariableTracker) -> None:
        """Remember ``vt``'s state before this instruction mutates it (for rollback).

        A list or dict from outside (an argument, ``**kwargs``, a global) is mutated in the
        tracker; after the graph its new contents are written back into the same object,
        so every alias sees them (Dynamo's side effects)."""
        if isinstance(vt, DequeVariable) and vt.source is not None:
            # a deque has no slice assignment: its final contents are written back by a
            # call after the graph, registered at its first write
            self._journal(vt)
            self._writes += 1
            if not vt.mutated:
                vt.mutated = True
                self.side_effect_objects.append(DeferredCallVariable(
                    ConstantVariable(refill_deque), [vt, DequeContentsVariable(vt)], {}))
            return
        if vt.source is not None:
            if not isinstance(vt, (ListVariable, ConstDictVariable, SetVariable)):
                raise Unsupported(f"mutation of a {vt.python_type().__name__} that comes "
                                  f"from outside the compiled region ({vt.source.name()})")
            if vt not in self.side_effect_objects:
                self.side_effect_objects.append(vt)
        self._journal(vt)
        if not isinstance(vt, IteratorVariable):  # an iterator's position is no write
            self._writes += 1
        if hasattr(vt, "mutated"):
            vt.mutated = True

    def record_side_effect(self, vt: VariableTracker) -> None:
        """``vt`` (maybe from outside) gets a pending attribute write, replayed after the
        graph; journaled like any mutation so a breaking instruction leaves no trace."""
        self._journal(vt)
        self._writes += 1
        if vt not in self.side_effect_objects:
            self.side_effect_objects.append(vt)

    def seed_before_graph(self, fn: Any, args: list) -> bool:
        """``torch.manual_seed(s)`` before the graph has drawn any random number: the call
        is made before the graph runs (every random op of the graph comes after it, as in
        the program), so it is no break. After a draw it still is one: the graph cannot
        split its random ops around the reseed."""
        if not all(a.is_python_constant() for a in args) or any(
                is_random(n) for n in self.output.graph.nodes):
            return False
        self.prologue.append((fn, tuple(a.as_python_constant() for a in args)))
        return True

    def defer_call(self, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
        """A call that only reports (``trace_rules.REPORTING``), made after the graph."""
        self.record_side_effect(DeferredCallVariable(fn, list(args), dict(kwargs)))
        return ConstantVariable(None)

    def _journal(self, vt: VariableTracker) -> None:
        if id(vt) not in self.journal:
            state = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict)
                         else v) for k, v in vt.__dict__.items()}
            self.journal[id(vt)] = (vt, state)

    def step(self, frame: Frame) -> Any:
        try:
            return super().step(frame)
        except Unsupported as e:
            if e.location is None:
                e.location = self.location_of(frame, frame.ip - 1)
            raise
        except TracedException as e:
            if frame is not self.frames[0]:
                raise  # a ``raise`` of the traced code, on its way to a handler in a caller
            err = Unsupported(f"{type(e.exc).__name__} raised by the traced code: {e.exc}")
            err.location = self.location_of(frame, frame.ip - 1)
            err.raised = True
            raise err from None
        except Exception as e:
            err = Unsupported(f"{type(e).__name__} raised while tracing: {e}")
            err.location = self.location_of(frame, frame.ip - 1)
            err.raised = True
            raise err from e

    def on_exception(self, frame: Frame, exc: BaseException) -> None:
        if isinstance(exc, TracedException):
            return  # the traced code's own exception, caught by the traced code
        err = Unsupported(f"exception handling while tracing ({type(exc).__name__}: {exc})")
        err.location = self.location_of(frame, frame.ip - 1)
        raise err

    def program_error(self, exc: Exception) -> Exception:
        return TracedException(exc)   # the program's own error: its ``except`` may catch it

    def chain_exception(self, frame: Frame, exc: BaseException) -> None:
        handled = frame.exc_stack[-1] if frame.exc_stack else None
        if isinstance(exc, TracedException) and isinstance(handled, TracedException):
            chain_context(exc.exc, handled.exc)

    @staticmethod
    def location_of(frame: Frame, index: int) -> tuple[str, int | None, str]:
        inst = frame.instructions[max(0, min(index, len(frame.instructions) - 1))]
        text = linecache.getline(frame.code.co_filename, inst.lineno or 0).strip()
        return frame.code.co_filename, inst.lineno, text

    def current_source_line(self) -> str:
        frame = self.frames[-1] if self.frames else None
        if frame is None:
            return ""
        filename, lineno, text = self.location_of(frame, frame.ip - 1)
        short = filename.rsplit("/", 1)[-1]
        return f"{short}:{lineno} in {frame.code.co_name}: {text}"

    def globals_scope(self, f_globals: dict) -> str:
        key = id(f_globals)
        if key not in self._scopes:
            mod = str(f_globals.get("__name__", "module"))
            label = "G_" + re.sub(r"[^0-9a-zA-Z]+", "_", mod)
            while label in self._scopes.values():
                label += "_"
            self._scopes[key] = label
            self.guards.env[label] = f_globals
        return self._scopes[key]

    # --- VM hooks ---------------------------------------------------------------------------
    def const(self, value):
        return ConstantVariable(value)

    def python_value(self, v):
        return realize(self, v).as_python_constant()

    def read_local(self, f, name):
        try:
            v = super().read_local(f, name)
        except UnboundLocalError as e:  # ``del y; y``: the traced code may catch it
            raise TracedException(e) from None
        if isinstance(v, LazyVariable):
            v = f.locals[name] = realize(self, v)
        return v

    def load_global(self, frame, name):
        scope = self.globals_scope(frame.globals)
        written = self._globals_written.get(scope)
        if written is not None and name in written.pending:  # assigned earlier in the frame
            if written.pending[name] is DELETED:
                raise TracedException(NameError(f"name {name!r} is not defined"))
            return written.pending[name]
        if name in frame.globals:
            return self.wrap_nested(frame.globals[name], GlobalSource(name, scope))
        if name in frame.builtins:
            self.guards.add("NOT_SHADOWED", f"{name!r} not in {scope}",
                            comment=f"builtin {name} not shadowed")
            return self.builder.wrap(frame.builtins[name], None)
        raise Unsupported(f"NameError: name {name!r} is not defined")

    def store_global(self, frame, name, value):
        # a side effect on the module, replayed after the graph (torch.compile does the same)
        scope = self.globals_scope(frame.globals)
        written = self._globals_written.setdefault(scope, GlobalsVariable(scope))
        self.record_side_effect(written)
        written.pending[name] = realize(self, value) if value is not DELETED else DELETED

    def delete_global(self, frame, name):
        scope = self.globals_scope(frame.globals)
        written = self._globals_written.get(scope)
        if written is not None and name in written.pending:
            exists = written.pending[name] is not DELETED
        else:
            exists = name in frame.globals
            self.guards.add("GLOBAL_EXISTS", f"{name!r} {'' if exists else 'not '}in {scope}",
                            comment=f"global {name} {'exists' if exists else 'is absent'}")
        if not exists:
            raise TracedException(NameError(f"name {name!r} is not defined"))
        self.store_global(frame, name, DELETED)

    def load_attr(self, obj, name):
        obj = realize(self, obj)
        if name == "__class__" and isinstance(obj, _TYPED_BY_CLASS) and inspect.getattr_static(
                obj.python_type(), "__class__") is _OBJECT_CLASS_SLOT:
            return self.call(BuiltinVariable(type), [obj], {})  # ``x.__class__`` is type(x)
        if name == "cell_contents" and isinstance(obj, (CellVariable, ClosureCellVariable)):
            return self.cell_get(obj, name)   # ``fn.__closure__[0].cell_contents``
        return obj.var_getattr(self, name)

    def store_attr(self, obj, name, value):
        obj = realize(self, obj)
        if _backend_settings(obj):
            return self._store_backend_setting(obj, name, realize(self, value))
        if isinstance(obj, (UserDefinedObjectVariable, NNModuleVariable,
                            NestedUserFunctionVariable, CachedFunctionVariable,
                            UserDefinedClassVariable, ConstDictVariable)):
            return obj.store_attr(self, name, realize(self, value))
        if name == "cell_contents" and isinstance(obj, (CellVariable, ClosureCellVariable)):
            return self.cell_set(obj, value)   # a write as ``nonlocal`` writes it
        if isinstance(obj, TensorVariable) and name == "data":
            return _store_tensor_data(obj, realize(self, value))
        if isinstance(obj, TensorVariable) and name == "requires_grad":
            # ``t.requires_grad = flag`` is ``t.requires_grad_(flag)``, which says what is
            # traced and what breaks
            self.call(obj.var_getattr(self, "requires_grad_"), [realize(self, value)], {})
            return None
        raise Unsupported(f"assignment to attribute {name!r} of {obj} (mutation of an object)")

    def _store_backend_setting(self, obj, name, value):
        """``torch.backends.cuda.matmul.allow_tf32 = False``: a setting of the kernels, held
        in C. The graph's kernels run under whatever the caller has set, so a write that
        changes the setting cannot be traced; one that writes the value it already has (a
        context manager that disables TF32 where it is off, then restores it) is nothing
        to replay -- the value is guarded, so a caller who changes it recompiles."""
        if not value.is_python_constant():
            raise Unsupported(f"assignment of {value} to torch.backends setting {name!r}")
        new = value.as_python_constant()
        try:
            current = getattr(obj.value, name)
        except AttributeError:
            current = _Missing
        if current is not _Missing and type(new) is type(current) and new == current and \
                is_constant_value(current):
            source = obj.source if obj.source is not None else ObjectSource(obj.value)
            self.guards.CONSTANT_MATCH(AttrSource(source, name), current)
            return None
        raise Unsupported(f"torch.backends setting {name!r} changed inside compiled code "
                          f"({current if current is not _Missing else 'unset'!r} -> {new!r}): "
                          "the graph's kernels would run under the caller's setting")

    def delete_attr(self, obj, name):
        obj = realize(self, obj)
        if isinstance(obj, UserDefinedObjectVariable):
            return obj.delete_attr(self, name)
        raise Unsupported(f"deleting attribute {name!r} of {obj}")

    def store_subscr(self, obj, key, value):
        if isinstance(obj, TensorVariable):
            self.output.create_node("call_function", operator.setitem, (obj, key, value), {})
        elif isinstance(obj, ConstDictVariable) and isinstance(inspect.getattr_static(
                obj.dict_cls, "__setitem__"), types.FunctionType):
            self.inline_user_function(inspect.getattr_static(obj.dict_cls, "__setitem__"),
                                      [obj, key, value], {})  # a dict subclass's own rule
        elif isinstance(obj, (ListVariable, ConstDictVariable)):
            obj.setitem(self, key, value)
        elif self.call_dunder(obj, "__setitem__", [key, value]) is None:
            raise Unsupported(f"item assignment on {obj}")   # (a Python __setitem__ is inlined)

    def delete_subscr(self, obj, key):
        if isinstance(obj, (ListVariable, ConstDictVariable)):
            obj.call_method(self, "__delitem__", [key], {})
        elif self.call_dunder(obj, "__delitem__", [key]) is None:
            raise Unsupported(f"del on {obj}")

    def truth(self, v):
        return realize(self, v).truth(self)

    def known_constant(self, vt: TensorVariable) -> torch.Tensor | None:
        """The value of a tensor the graph makes from Python constants alone, or None
        (:func:`_known_constant`), or a table the program wrote (``torch.tensor(literal)``)
        that nothing has written into since."""
        literal = getattr(vt, "literal", None)
        if literal is not None and not vt.fake._version:
            return literal
        return _known_constant(vt)

    def is_none(self, v):
        v = realize(self, v)
        return isinstance(v, ConstantVariable) and v.value is None

    def get_iter(self, v):
        v = realize(self, v)
        if isinstance(v, IteratorVariable):
            return v  # iter(it) is it
        dunder = self.call_dunder(v, "__iter__", [])
        if dunder is not None:  # a class with __iter__ in Python (often a generator)
            if isinstance(dunder, UserDefinedObjectVariable) and _python_method(
                    dunder, "__next__"):
                return dunder  # an iterator object of a Python class
            return self.get_iter(dunder)
        if isinstance(v, UserDefinedObjectVariable) or _user_module_method(v, "__getitem__"):
            if _python_method(v, "__getitem__"):  # the old sequence protocol
                return self.inline_user_function(polyfills.sequence_iter, [v], {})
            raise Unsupported(f"iteration over a {type(v.value).__name__} object (no "
                              "__iter__ written in Python)")
        return ListIteratorVariable(v.unpack(self))

    def iter_next(self, it):
        if isinstance(it, IteratorVariable):
            return it.next(self)
        if isinstance(it, UserDefinedObjectVariable) and _python_method(it, "__next__"):
            try:
                return self.call_dunder(it, "__next__", [])
            except TracedException as e:
                if isinstance(e.exc, StopIteration):
                    raise StopIteration from None
                raise
        raise Unsupported(f"next() on {it}")

    def unpack(self, seq):
        seq = realize(self, seq)
        if isinstance(seq, UserDefinedObjectVariable) or _user_module_method(seq, "__iter__") \
                or _user_module_method(seq, "__getitem__"):  # through the class's own __iter__
            it, items = self.get_iter(seq), []
            while True:
                try:
                    items.append(self.iter_next(it))
                except StopIteration:
                    return items
        return seq.unpack(self)

    # --- generators ----------------------------------------------------------------------
    def resume_generator(self, gen: GeneratorVariable, sent: VariableTracker | None,
                         throw: BaseException | None = None) -> VariableTracker:
        """Run ``gen``'s frame from where it stopped to its next ``yield`` and return the
        value yielded; ``sent`` is the value of the ``yield`` expression it stopped at
        (``throw``: raise that exception there instead). Raises StopIteration once the
        body returns. The frame is copied first: rolling back the consuming instruction
        restores the old one (the journal holds it)."""
        if gen.done:
            if throw is not None:
                raise TracedException(throw)
            raise StopIteration
        self.record_mutation(gen)
        frame = gen.frame = gen.frame.copy()
        if not gen.started:
            if throw is not None:  # thrown into a generator that never ran: it ends
                gen.done = True
                raise TracedException(throw)
            if sent is not None and not (sent.is_python_constant() and
                                         sent.as_python_constant() is None):
                raise TracedException(TypeError("can't send non-None value to a "
                                                "just-started generator"))
            gen.started = True
        elif throw is not None:
            self._raise_in_frame(frame, TracedException(throw))
        else:
            frame.push(sent)  # the value of the yield expression it stopped at
        self.frames.append(frame)
        try:
            while True:
                outcome = self.step(frame)
                if outcome is _YIELD:
                    return frame.pop()
                if outcome is _RETURN:
                    gen.done = True
                    raise StopIteration(frame.return_value)
        except TracedException:
            gen.done = True  # an exception out of the body finishes the generator
            raise
        finally:
            self.frames.pop()

    def close_generator(self, gen: GeneratorVariable) -> VariableTracker:
        """``gen.close()``: GeneratorExit at the ``yield`` it stopped at; the body may
        clean up (``finally``) but must not yield again."""
        if gen.suspended:
            try:
                self.resume_generator(gen, None, throw=GeneratorExit())
            except (StopIteration, TracedException) as e:
                exc = getattr(e, "exc", None)
                if exc is not None and not isinstance(exc, (GeneratorExit, StopIteration)):
                    raise
            else:
                raise TracedException(RuntimeError("generator ignored GeneratorExit"))
        self.record_mutation(gen)
        gen.done = True
        return ConstantVariable(None)

    @staticmethod
    def _raise_in_frame(frame: Frame, exc: TracedException) -> None:
        """Raise ``exc`` at the frame's current instruction, as CPython raises a thrown
        exception at the ``yield`` a generator stopped at: to the handler that protects it,
        or out of the frame."""
        entry = frame.ncode.handler_for(frame.ip)
        if entry is None:
            raise exc
        del frame.stack[entry.depth:]
        if entry.lasti:
            frame.push(frame.instructions[frame.ip].offset)
        frame.push(exc)
        frame.ip = entry.target

    def build_tuple(self, items):
        return TupleVariable(items)

    def build_list(self, items):
        return ListVariable(items)

    def build_set(self, items):
        return SetVariable(items, tx=self)

    def build_map(self, pairs):
        made = ConstDictVariable({})
        for k, v in pairs:   # (keys that are objects: dict_key, their trackers remembered)
            made.items[made._key(k, self)] = v
        return made

    def build_map_from_dict(self, d):
        return ConstDictVariable(d)

    def build_slice(self, *parts):
        parts = [_as_vt(p) for p in parts]
        if all(p.is_python_constant() for p in parts):
            return ConstantVariable(slice(*[p.as_python_constant() for p in parts]))
        return SliceVariable(parts)

    def list_append(self, lst, v):
        lst.call_method(self, "append", [v], {})

    def list_extend(self, lst, v):
        lst.call_method(self, "extend", [v], {})

    def set_add(self, s, v):
        s.call_method(self, "add", [v], {})

    def set_update(self, s, v):
        s.call_method(self, "update", [v], {})

    def map_add(self, d, k, v):
        d.setitem(self, k, v)

    def dict_update(self, d, other, merge):
        other = realize(self, other)
        if not isinstance(other, ConstDictVariable):
            raise Unsupported("** of a non-dict")
        if merge:   # ``f(**a, **b)`` with a key in both raises, as CPython does
            for k in other.items:
                if k in d.items:
                    raise TracedException(TypeError(
                        f"got multiple values for keyword argument {k!r}"))
        self.record_mutation(d)
        d.items.update(other.items)
        d.key_trackers.update(other.key_trackers)

    def call_args_from_ex(self, args, kwargs):
        pos = self.unpack(args)
        kw = {}
        if kwargs is not None:
            kwargs = realize(self, kwargs)
            if not isinstance(kwargs, ConstDictVariable):
                raise Unsupported("** of a non-dict")
            kw = dict(kwargs.items)
        return pos, kw

    def new_cell(self, *contents):
        return CellVariable(*contents)

    def cell_get(self, cell, name):
        if isinstance(cell, CellVariable):
            if cell.contents is CellVariable.EMPTY:
                raise Unsupported(f"NameError: free variable {name!r} is empty")
            cell.contents = realize(self, cell.contents)
            return cell.contents
        if isinstance(cell, ClosureCellVariable):
            if "cell_contents" in cell.pending:  # written earlier in this capture
                if cell.pending["cell_contents"] is DELETED:
                    raise Unsupported(f"NameError: free variable {name!r} is empty")
                return cell.pending["cell_contents"]
            src = CellContentsSource(cell.source) if cell.source is not None else None
            try:
                contents = cell.cell.cell_contents
            except ValueError:
                raise Unsupported(f"NameError: free variable {name!r} is empty") from None
            return self.wrap_nested(contents, src)
        raise Unsupported(f"LOAD_DEREF of {cell}")

    def cell_set(self, cell, value):
        if isinstance(cell, CellVariable):
            self.record_mutation(cell)
            cell.contents = value
            return
        if isinstance(cell, ClosureCellVariable) and cell.source is not None:
            # a cell of the real frame or of a closure (``nonlocal total; total += v``):
            # written after the graph, like an attribute; reads here see the new value
            self.record_side_effect(cell)
            cell.pending["cell_contents"] = realize(self, value)
            return
        raise Unsupported("assignment to a closure variable that cannot be reached after "
                          "the graph (nonlocal)")

    def make_function(self, frame, code, defaults, kwdefaults, annotations, closure):
        code = code.as_python_constant()
        if isinstance(annotations, BaseListVariable):  # 3.11-3.13: (name, value) pairs
            items = annotations.items
            annotations = ConstDictVariable({k.as_python_constant(): v for k, v in
                                             zip(items[::2], items[1::2])})
        return NestedUserFunctionVariable(code, frame.globals, defaults, kwdefaults, closure,
                                          code.co_qualname, annotations)

    def format_value(self, value, conversion, spec):
        value = realize(self, value)
        if value.is_python_constant() and (spec is None or spec.is_python_constant()):
            v = value.as_python_constant()
            if conversion is not None:
                v = conversion(v)
            return ConstantVariable(format(v, spec.as_python_constant() if spec else ""))
        if isinstance(value, UserDefinedObjectVariable) and conversion in (None, str, repr) \
                and (spec is None or spec.is_python_constant()) and (
                conversion is not None or inspect.getattr_static(
                    type(value.value), "__format__", None) is object.__format__):
            # ``f"{obj}"`` / ``f"{obj!r}"``: object.__format__ is str(obj), and refuses a spec
            if conversion is None and spec is not None and spec.as_python_constant():
                raise TracedException(TypeError(
                    f"unsupported format string passed to {type(value.value).__name__}"
                    ".__format__"))
            text = user_object_text(self, value, conversion or str)
            if text is not None:
                return ConstantVariable(format(text.as_python_constant(),
                                               spec.as_python_constant() if spec else ""))
        raise Unsupported(f"formatting {value} into a string")

    def build_string(self, parts):
        return ConstantVariable("".join(p.as_python_constant() for p in parts))

    def import_name(self, frame, name, fromlist, level):
        # ``import torch`` / ``from x import y`` (transformers imports its optional kernels
        # inside forward): imported now, while tracing, as PyTorch's Dynamo does -- a
        # module's code runs once, at its first import, whether that is here or in the
        # first call -- and the module object is a constant of the trace after that
        level = level.as_python_constant() if isinstance(level, VariableTracker) else level
        fromlist = fromlist.as_python_constant() if isinstance(fromlist, VariableTracker) \
            else fromlist
        try:
            top = importlib.__import__(name, frame.globals, None, fromlist, level)
        except ImportError as e:   # the traced code may catch it (an optional dependency)
            raise TracedException(e) from None
        # the module object is fixed (``sys.modules`` keeps it): reached through it, what
        # the code reads from it has a source to guard (``from scipy.fft import
        # next_fast_len``, an lru_cache object, is then a value like a global one)
        return self.builder.wrap(top, ObjectSource(top))

    def raise_exception(self, exc, cause=NULL):
        # ``raise E(...)`` inside an inlined function may be caught by that function or a
        # caller it inlines from (``Sequence.__iter__`` ends on IndexError); one that
        # would leave the compiled frame is a graph break, so the real run raises it
        exc = realize(self, exc)
        value = exc.as_python_constant() if exc.is_python_constant() or isinstance(
            exc, BuiltinVariable) else None
        if isinstance(value, type) and issubclass(value, Exception):
            value = value()
        if not isinstance(value, Exception):
            raise Unsupported("raise statement")
        # ``raise ... from c`` sets ``__cause__`` (``from None`` too, which hides the
        # context; ``chain_exception`` sets that), as CPython does: a handler may read them
        if cause is not NULL:
            value.__cause__ = self._exception_cause(cause)
        raise TracedException(value)

    def _exception_cause(self, cause) -> BaseException | None:
        """The value of ``c`` in ``raise e from c``: an exception (a class is called), or
        None."""
        if isinstance(cause, TracedException):   # ``except E as c: raise X from c``
            return cause.exc
        cause = realize(self, cause)
        value = cause.as_python_constant() if cause.is_python_constant() or isinstance(
            cause, BuiltinVariable) else NULL
        if isinstance(value, type) and issubclass(value, BaseException):
            value = value()
        if value is not None and not isinstance(value, BaseException):
            raise Unsupported(f"raise ... from {cause}")
        return value

    def LOAD_ASSERTION_ERROR(self, f, inst):
        f.push(self.builder.wrap(AssertionError, None))  # a class to call, not a folded constant

    def LOAD_BUILD_CLASS(self, f, inst):
        f.push(self.builder.wrap(builtins.__build_class__, None))  # its call is the break

    def CHECK_EXC_MATCH(self, f, inst):
        typ = realize(self, f.pop()).as_python_constant()
        exc = f.stack[-1]
        if not isinstance(exc, TracedException):  # never match a tracker by its own type
            raise Unsupported(f"an except clause matching {exc}")
        f.push(ConstantVariable(isinstance(exc.exc, typ)))

    @property
    def grad_enabled(self) -> bool:
        if self.grad_stack:
            return self.grad_stack[-1]
        return torch.is_grad_enabled() if self.global_grad is None else self.global_grad

    def set_grad_mode(self, mode: bool) -> None:
        """``torch.set_grad_enabled(mode)`` as a statement: the mode of the ops traced after
        it. Inside a traced ``no_grad``/``enable_grad`` block it lasts until the block ends
        (whose exit puts back the mode it found, as PyTorch's does); outside one it is the
        global mode from here on, and the compiled code sets it after the graph."""
        if self.grad_stack:
            self.grad_stack[-1] = mode
        else:
            self.global_grad = mode

    def BEFORE_WITH(self, f, inst):
        # torch.no_grad/enable_grad change the grad mode of the graph's ops; a context
        # manager written in Python has its __enter__ inlined here, and its __exit__ inlined
        # where the block ends (the normal exit's call, or WITH_EXCEPT_START below)
        mgr = realize(self, f.stack[-1])
        made = getattr(mgr, "fn", None)
        if isinstance(made, torch.autocast):
            # a torch.autocast made outside the frame (a global, or the decorator form's
            # closure): its state, fixed when it was made, guarded by identity
            if mgr.source is not None:
                self.guards.ID_MATCH(mgr.source, made)
            mgr = f.stack[-1] = AutocastVariable.from_object(made)
        if not (isinstance(mgr, (GradModeVariable, AutocastVariable))
                or _python_context_manager(mgr)):
            raise Unsupported(f"with-block on {mgr} (only torch.no_grad/enable_grad, "
                              "torch.autocast and context managers whose "
                              "__enter__/__exit__ are Python are traced)")
        super().BEFORE_WITH(f, inst)

    def WITH_EXCEPT_START(self, f, inst):
        # an exception the traced code raised inside the block: __exit__(type, value, tb)
        # decides whether it is suppressed (no traceback exists while tracing: None)
        exc = f.stack[-1]
        if not isinstance(exc, TracedException):
            raise Unsupported(f"with-block exit on {exc}")
        args = [self.builder.wrap(type(exc.exc), None), ConstantVariable(exc.exc),
                ConstantVariable(None)]
        f.push(self.call(f.stack[-4], args, {}))

    def call(self, fn, args, kwargs):
        fn = realize(self, fn) if isinstance(fn, VariableTracker) else self.builder.wrap(fn, None)
        # (a raw value is a constant an opcode handler passes: MATCH_MAPPING's Mapping)
        args = [self.builder.wrap(a, None) if _raw_constant(a) else realize(self, a) for a in args]
        kwargs = {k: realize(self, v) for k, v in kwargs.items()}
        return fn.call_function(self, args, kwargs)

    # --- branches into a raise ------------------------------------------------------------
    def POP_JUMP_IF_TRUE(self, f, inst):
        if not self.assume_branch(f, inst, jumps_if=True):
            super().POP_JUMP_IF_TRUE(f, inst)

    def POP_JUMP_IF_FALSE(self, f, inst):
        if not self.assume_branch(f, inst, jumps_if=False):
            super().POP_JUMP_IF_FALSE(f, inst)

    def assume_branch(self, f: Frame, inst, jumps_if: bool) -> bool:
        """``if not torch._is_all_true(valid): raise ValueError(...)`` (every
        torch.distributions constructor validates so), ``assert (x >= 0).all(), msg``: a
        branch on a tensor's truth whose one side only raises. The trace takes the other
        side and the graph returns the condition as an extra output; after the graph runs,
        the compiled code checks it (:func:`eval_frame.checked_call`) and, should it not
        hold, runs the frame uncompiled from where the graph began -- so the program raises
        what it raises, message and all. That rerun is only safe for a graph that changes
        nothing and draws no random number: ``compile_entry`` traces again without
        assumptions otherwise: the branch is then a break that says why."""
        cond = realize(self, f.stack[-1])
        pending = self.pending_or.get(id(f))   # (kept on a break: see ``capture``)
        if not isinstance(cond, TensorVariable) or cond.node is None or \
                not isinstance(cond.fake, torch.Tensor) or any(
                    isinstance(n, torch.SymInt) for n in cond.fake.shape) or \
                cond.fake.numel() != 1:
            if pending is not None:
                raise Unsupported("`assert a or b` whose operands are not all tensors")
            return False
        jump_raises = _only_raises(f.instructions, inst.target)
        if jump_raises == _only_raises(f.instructions, f.ip):
            if jumps_if and self.assume and \
                    _or_before_raise(f.instructions, f.ip, inst.target):
                # ``assert diff.all() or (~diff).all(), msg`` (torchdiffeq's check of its
                # time grid): a true operand jumps past the raise, the last false one falls
                # into it. The next operand is traced as if this one were false -- the
                # code between is only its computation -- and the last branch checks
                # ``a | b | ...``. A break before that branch never resumes where ``a``
                # was taken as false: inside an inlined call the whole call is put back,
                # and in this frame it is run uncompiled (``capture``)
                f.pop()
                self.pending_or[id(f)] = ([*(pending[0] if pending else []), cond],
                                          inst.target, pending[2] if pending else self._writes)
                return True
            if pending is not None:
                raise Unsupported("`assert a or b` in another shape than operands that jump "
                                  "past one raise")
            return False
        if pending is not None:
            if not jumps_if or jump_raises or not _same_continuation(
                    f.instructions, pending[1], inst.target):
                raise Unsupported("`assert a or b` in another shape than operands that jump "
                                  "past one raise")
            if self._writes != pending[2]:
                # computing ``b`` wrote something (a list append, an attribute): eager does
                # not compute it when ``a`` holds, the graph would always replay the write
                raise Unsupported("`assert a or b` whose later operands write state")
            del self.pending_or[id(f)]
            for earlier in reversed(pending[0]):
                cond = self.output.create_node("call_function", torch.logical_or,
                                               (earlier, cond), {})
            f.stack[-1] = cond
        if not self.assume:
            raise Unsupported(
                "a check on a tensor's value that raises (`assert`, `if ...: raise`) in a "
                "graph that writes a tensor in place or draws random numbers: it cannot be "
                "checked after the graph ran, since running the frame again to raise would "
                "write or draw twice")
        f.pop()
        # the side that does not raise is taken: the jump when its target raises not
        self.assumptions.append((cond, jumps_if if not jump_raises else not jumps_if))
        if not jump_raises:
            f.ip = inst.target
        return True

    # --- operators --------------------------------------------------------------------------
    def binary_op(self, fn, a, b):
        a, b = realize(self, _as_vt(a)), realize(self, _as_vt(b))
        if fn in (operator.is_, operator.is_not):
            same = _identical(a, b)
            for side in (a, b):  # identity of an outside object was read: guard it
                if isinstance(side, (UserDefinedObjectVariable, UserDefinedClassVariable)) \
                        and side.source is not None:
                    self.guards.ID_MATCH(side.source, side.value)
            return ConstantVariable(same if fn is operator.is_ else not same)
        if fn is operator.contains:
            return self._contains(a, b)
        if fn in _DUNDERS and (isinstance(a, UserDefinedObjectVariable) or
                               isinstance(b, UserDefinedObjectVariable) or any(
                                   _user_module_method(v, name) or
                                   _dict_subclass_method(v, name) for v in (a, b)
                                   for name in _DUNDERS[fn])):
            # (a module of the user's class whose operator is written in Python too:
            # tltorch's ``[...] + factor_list`` reaches FactorList.__radd__)
            return self._user_binary_op(fn, a, b)
        if (isinstance(a, NumpyNdarrayVariable) or isinstance(b, NumpyNdarrayVariable)) \
                and fn in NDARRAY_OPERATORS:
            return ndarray_binary_op(self, fn, a, b)   # NumPy's rules, in torch._numpy
        if fn is operator.getitem and isinstance(a, NumpyNdarrayVariable):
            # ``a[0]``, ``a[1:, ::2]``: NumPy's indexing, and an array again -- whose
            # methods are ndarray's (``a[0].max(0)`` is a number, not torch's (values,
            # indices))
            return ndarray_getitem(self, a, b)
        if isinstance(a, NumpyNdarrayVariable) and fn in _NDARRAY_INPLACE:
            if a.scalar:   # NumPy's scalars are immutable: ``s += 1`` is ``s = s + 1``
                return ndarray_binary_op(self, _NDARRAY_INPLACE[fn], a, b)
            # ``a += 1``: written into the array's tensor, and still an array
            result = self.output.create_node("call_function", fn, (a, b), {})
            return result if isinstance(result, NumpyNdarrayVariable) else \
                NumpyNdarrayVariable(result)
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            if fn is operator.getitem and isinstance(a, ConstDictVariable):
                return a.getitem(self, b)   # ``optimizer.state[p]``: keyed by the tensor
            if fn is operator.getitem and not isinstance(a, TensorVariable):
                # ``seq[t]`` calls ``t.__index__()``: a value known only if the tensor is a
                # constant of the graph (``torch.as_tensor(2)``)
                known = _known_constant(b)
                if known is None or not (isinstance(a, BaseListVariable) or isinstance(
                        a, ConstantVariable) and isinstance(a.value, (str, bytes, tuple, range))):
                    raise Unsupported(f"indexing {a} with a tensor (its value is not known "
                                      "while tracing)")
                try:
                    b = ConstantVariable(operator.index(known))
                except TypeError as e:  # a float tensor, or more than one element
                    raise TracedException(e) from None
                return self.binary_op(fn, a, b)
            return self.output.create_node("call_function", fn, (a, b), {})
        if isinstance(a, SymIntVariable) or isinstance(b, SymIntVariable):
            return self._symint_op(fn, a, b)
        if fn is operator.getitem:
            return self._getitem(a, b)
        if isinstance(a, ConstDictVariable) and isinstance(b, ConstDictVariable) and \
                fn in (operator.or_, operator.ior):
            # ``kwargs | {"backend": b}``: a new dict of a's kind; ``d |= other``: in place
            merged = a if fn is operator.ior else a.call_method(self, "copy", [], {})
            merged.call_method(self, "update", [b], {})
            return merged
        if isinstance(a, SetVariable) and fn in _SET_OPERATORS and (
                isinstance(b, SetVariable) or isinstance(b, ConstantVariable) and
                isinstance(b.value, frozenset)):
            # ``seen |= other``: in place, as CPython (an alias sees it); ``a - b``: a new set
            return a.call_method(self, _SET_OPERATORS[fn], [b], {})
        if a.is_python_constant() and b.is_python_constant() and not isinstance(
                a, (BaseListVariable, ConstDictVariable)):
            try:
                return wrap_constant_result(fn(a.as_python_constant(), b.as_python_constant()))
            except Unsupported:
                raise
            except Exception as e:  # what CPython raises here: the traced code may catch it
                raise TracedException(e) from None
        if fn in (operator.add, operator.iadd):  # ``(-1,) + x.shape[1:]`` with a symbolic size
            a, b = (TupleVariable([ConstantVariable(i) for i in v.as_python_constant()])
                    if isinstance(v, ConstantVariable) and isinstance(v.value, tuple) and
                    isinstance(w, (TupleVariable, SizeVariable)) else v
                    for v, w in ((a, b), (b, a)))
        if fn is operator.iadd and isinstance(a, ListVariable) and \
                not isinstance(b, TensorVariable):
            # ``y += (f(y[-1]) for ...)``, ``acc += "ab"``, ``q += other``: list.__iadd__ (and
            # deque's) extends by any iterable, in place -- an alias, or the caller's list,
            # sees it (folding the constants made a new list and left the original as it was)
            a.call_method(self, "extend", [b], {})
            return a
        if fn is operator.imul and isinstance(a, ListVariable) and b.is_python_constant() \
                and isinstance(b.as_python_constant(), int):
            # ``acc *= 2``: list.__imul__ (and deque's, up to its maxlen) repeats in place
            times = b.as_python_constant()
            if times <= 0:
                a.call_method(self, "clear", [], {})
            else:
                a.call_method(self, "extend", [ListVariable(list(a.items) * (times - 1))], {})
            return a
        if isinstance(a, BaseListVariable) and fn in (operator.add, operator.iadd) and \
                isinstance(b, BaseListVariable):
            if fn is operator.iadd and isinstance(a, ListVariable):
                a.call_method(self, "extend", [b], {})  # (a deque's drops beyond maxlen)
                return a
            if _base_kind(a) is not _base_kind(b):  # ``[1] + (2,)``: what CPython raises
                raise TracedException(TypeError(
                    f"can only concatenate {_base_kind(a).__name__} (not "
                    f"{_base_kind(b).__name__!r}) to {_base_kind(a).__name__}"))
            return _sequence_like(a, a.items + b.items)
        if isinstance(a, BaseListVariable) and fn in (operator.mul, operator.imul) and \
                b.is_python_constant():   # (``t *= 2`` of a tuple: a new tuple)
            return _sequence_like(a, a.items * b.as_python_constant())
        if isinstance(b, BaseListVariable) and fn is operator.mul and a.is_python_constant():
            return _sequence_like(b, b.items * a.as_python_constant())
        if fn in (operator.eq, operator.ne) and isinstance(a, BaseListVariable) and \
                isinstance(b, BaseListVariable):
            if len(a.items) != len(b.items) or _base_kind(a) is not _base_kind(b):
                return ConstantVariable(fn is operator.ne)   # (``[1] == (1,)`` is False)
            result = all(_identical(x, y) or self.binary_op(operator.eq, x, y).truth(self)
                         for x, y in zip(a.items, b.items))  # identity first, as CPython
            return ConstantVariable(result if fn is operator.eq else not result)
        if isinstance(a, (BaseListVariable, ConstDictVariable)) and a.is_python_constant() \
                and b.is_python_constant():
            return wrap_constant_result(fn(a.as_python_constant(), b.as_python_constant()))
        if fn in (operator.eq, operator.ne) and _fixed_equality(a) is not _Missing \
                and _fixed_equality(b) is not _Missing:
            # ``type(self).__init__ != cls.__init__``, ``fn == None``: functions, classes and
            # modules compare by identity, builtin functions by what they wrap
            return ConstantVariable(fn(_fixed_equality(a), _fixed_equality(b)))
        if fn in (operator.eq, operator.ne) and _equal_by_identity(a, b):
            # ``reduction == "rearrange"`` with a ``functools.partial``: both sides'
            # ``__eq__`` give NotImplemented (object's, or a str's against a non-str), so
            # CPython falls back to ``a is b``
            same = _identical(a, b)
            return ConstantVariable(same if fn is operator.eq else not same)
        raise Unsupported(f"operator {getattr(fn, '__name__', fn)} on {a} and {b}")

    def _user_binary_op(self, fn, a, b):
        """``a op b`` with an object of a Python class on either side, as CPython decides
        it: ``type(a).__op__(a, b)``, then ``type(b).__rop__(b, a)`` if that gave
        NotImplemented (the reflected one first when b's class is a subclass of a's that
        overrides it); for ``==``/``!=`` between objects whose classes define neither,
        identity. Methods written in Python are inlined; one in C is a break."""
        forward, reflected = _DUNDERS[fn]
        inplace = _INPLACE[fn][0] if fn in _INPLACE else None
        tries = [(a, inplace, b)] if inplace else []
        tries += [(a, forward, b), (b, reflected, a)]
        kind_a, kind_b = (_python_class(v) for v in (a, b))
        if kind_a is not None and kind_b is not None and kind_b is not kind_a and \
                issubclass(kind_b, kind_a) and reflected in vars(kind_b):
            tries[-2:] = tries[-2:][::-1]
        for obj, name, other in tries:
            kind = _python_class(obj)
            method = inspect.getattr_static(kind, name, None) if kind is not None else None
            if name == "__ne__" and (method is None or method is object.__ne__):
                # object's own ``__ne__`` asks the class's ``__eq__`` and negates it (a
                # class that defines only ``__eq__``, as ``total_ordering`` asks for)
                eq = inspect.getattr_static(kind, "__eq__", None) if kind else None
                if isinstance(eq, types.FunctionType):
                    result = self.inline_user_function(eq, [obj, other], {})
                    if not (result.is_python_constant() and
                            result.as_python_constant() is NotImplemented):
                        return self.unary_op(operator.not_, result)
                continue
            if method is None or method is getattr(object, name, None):
                continue  # object's own: NotImplemented for an object of another kind
            if not isinstance(method, types.FunctionType):
                raise Unsupported(f"{kind.__name__}.{name} is not written in Python")
            result = self.inline_user_function(method, [obj, other], {})
            if not (result.is_python_constant() and
                    result.as_python_constant() is NotImplemented):
                return result
        if fn in (operator.eq, operator.ne):
            same = _identical(a, b)
            for side in (a, b):
                if isinstance(side, UserDefinedObjectVariable) and side.source is not None:
                    self.guards.ID_MATCH(side.source, side.value)
            return ConstantVariable(same if fn is operator.eq else not same)
        raise TracedException(TypeError(
            f"unsupported operand type(s) for {_SYMBOLS.get(fn, fn.__name__)}: "
            f"{type(a.example()).__name__!r} and {type(b.example()).__name__!r}"))

    def unary_op(self, fn, a):
        a = realize(self, a)
        if isinstance(a, NumpyNdarrayVariable) and fn is not operator.not_:
            return ndarray_call(self, fn, [a], {})   # ``-a``, ``abs(a)``: an array again
        if isinstance(a, TensorVariable):
            if fn is operator.not_:
                raise Unsupported("`not tensor` (data-dependent)")
            return self.output.create_node("call_function", fn, (a,), {})
        if isinstance(a, SymIntVariable):
            if fn is operator.not_:
                return ConstantVariable(not a.specialize(self))
            return self._symint_op(fn, a, None)
        if a.is_python_constant():
            return wrap_constant_result(fn(a.as_python_constant()))
        if fn is operator.not_:
            return ConstantVariable(not a.truth(self))
        if fn in _UNARY_DUNDERS:
            # ``-v``, ``+v``, ``~v``, ``abs(v)`` on an object of a Python class: its
            # ``__neg__``/``__pos__``/``__invert__``/``__abs__``, inlined
            result = self.call_dunder(a, _UNARY_DUNDERS[fn], [])
            if result is not None:
                return result
            if _dict_subclass_method(a, _UNARY_DUNDERS[fn]):   # ``-counter``
                method = inspect.getattr_static(a.dict_cls, _UNARY_DUNDERS[fn])
                return self.inline_user_function(method, [a], {})
            kind = _python_class(a)
            if kind is not None and inspect.getattr_static(kind, _UNARY_DUNDERS[fn],
                                                           None) is None:
                spelled = "abs()" if fn is abs else f"unary {_UNARY_SYMBOLS[fn]}"
                raise TracedException(TypeError(
                    f"bad operand type for {spelled}: '{kind.__name__}'"))
        raise Unsupported(f"operator {fn.__name__} on {a}")

    def call_dunder(self, obj: VariableTracker, name: str, args: list):
        """``obj.__name__(*args)`` for an object whose class defines it in Python (a
        ``Mapping`` subclass's ``__getitem__``/``__contains__``): inlined. None otherwise."""
        if not isinstance(obj, UserDefinedObjectVariable) and not _user_module_method(obj, name):
            return None
        method = inspect.getattr_static(type(obj.value), name, None)
        if not isinstance(method, types.FunctionType):
            return None
        return self.inline_user_function(method, [obj, *args], {})

    def _getitem(self, a, b):
        if (isinstance(a, UserDefinedObjectVariable) and is_typing_form(a.value)) or (
                isinstance(a, (BuiltinVariable, UserDefinedClassVariable))
                and _generic_class(a.as_python_constant())):
            return self._typing_subscript(a, b)
        dunder = self.call_dunder(a, "__getitem__", [b])
        if dunder is not None:
            return dunder
        if isinstance(a, (BaseListVariable, ConstDictVariable, DataclassVariable)):
            return a.getitem(self, b)
        if isinstance(a, NNModuleVariable):
            return a.call_method(self, "__getitem__", [b], {})
        if a.is_python_constant() and b.is_python_constant():
            try:
                value = a.as_python_constant()[b.as_python_constant()]
            except (IndexError, KeyError) as e:  # "abc"[5]: the traced code may catch it
                raise TracedException(e) from None
            return wrap_constant_result(value)
        raise Unsupported(f"indexing {a}")

    def _typing_subscript(self, a, b):
        """``List[torch.Tensor]``, ``Optional[int]``, ``list[int]`` written inside traced
        code (TorchScript-minded models write ``torch.jit.annotate(List[Tensor],
        [])``: timm's CrossViT does, once per block). typing caches these subscriptions in a
        ``functools.lru_cache`` made inside a closure, which has no source to trace into --
        seven graph breaks on CrossViT. A subscription of a typing construct by types is an
        immutable description of a type, the same for the same arguments: it is computed
        here (Dynamo's ``TypingVariable`` does the same), with ``a`` guarded by identity
        where it was read (``List`` rebound to ``Dict`` would give another result)."""
        try:
            key = _typing_argument(b)
        except (Unsupported, NotImplementedError, AttributeError, TypeError):
            raise Unsupported(f"a typing subscript {a}[{b}]") from None
        form = a.value if isinstance(a, UserDefinedObjectVariable) else a.as_python_constant()
        if a.source is not None:
            self.guards.ID_MATCH(a.source, form)
        return UserDefinedObjectVariable(form[key])

    def _contains(self, container, item):
        dunder = self.call_dunder(container, "__contains__", [item])
        if dunder is not None:
            return ConstantVariable(dunder.truth(self))
        if isinstance(container, ConstDictVariable):
            return ConstantVariable(container.lookup(item, self) is not None)
        if isinstance(container, SetVariable):
            return ConstantVariable(container.contains(item, self))
        if isinstance(container, NNModuleVariable) and item.is_python_constant():
            return container.call_method(self, "__contains__", [item], {})
        if isinstance(container, BaseListVariable):
            # as CPython's list/tuple/deque ``__contains__``: element by element, identity
            # first, then ``element == item``, stopping at the first hit -- a tensor is only
            # compared (data-dependent) when no element before it matched
            return ConstantVariable(any(self.element_matches(e, item, "`in`")
                                        for e in container.items))
        if container.is_python_constant() and item.is_python_constant():
            return ConstantVariable(item.as_python_constant() in
                                    container.as_python_constant())
        if isinstance(container, ConstantVariable) and type(container.value) is tuple:
            # ``reduction in ("min", "max")`` with a non-constant item: a tuple's search,
            # element by element as above
            return ConstantVariable(any(
                self.element_matches(ConstantVariable(e), item, "`in`")
                for e in container.value))
        if isinstance(container, UserDefinedObjectVariable) and (
                _python_method(container, "__iter__") or
                _python_method(container, "__getitem__")):
            # no ``__contains__``: CPython searches what iterating yields (``__iter__``, or
            # the old sequence protocol of ``__getitem__``), stopping at the first match
            it = self.get_iter(container)
            while True:
                try:
                    element = self.iter_next(it)
                except StopIteration:
                    return ConstantVariable(False)
                if self.element_matches(element, item, "`in`"):
                    return ConstantVariable(True)
        raise Unsupported(f"`in` on {container}")

    def element_matches(self, element, item, what: str) -> bool:
        """CPython's ``PyObject_RichCompareBool(element, item, Py_EQ)``, the test of a
        list's, tuple's and deque's ``__contains__``, ``index``, ``count`` and ``remove``:
        identity first, then ``element == item``. A search for a module or a tensor by
        identity (``params.remove(p)``) matches without comparing; a tensor is only
        compared (data-dependent) when an element before it is not the same object."""
        if _identical(element, item):
            return True
        if isinstance(element, TensorVariable) or isinstance(item, TensorVariable):
            raise Unsupported(f"{what} with tensors (data-dependent ==: a tensor that is "
                              "not the same object is compared)")
        return self.binary_op(operator.eq, element, item).truth(self)

    def _symint_op(self, fn, a, b):
        operands = [x for x in (a, b) if x is not None]
        values = []
        for x in operands:
            if isinstance(x, SymIntVariable):
                values.append(x.value)
            elif x.is_python_constant() and isinstance(x.as_python_constant(), (int, float)):
                values.append(x.as_python_constant())
            else:
                raise Unsupported(f"operator {fn.__name__} on a symbolic size and {x}")
        result = fn(*values)
        exprs = [x.expr if isinstance(x, SymIntVariable)
                 else self.guards.literal(x.as_python_constant()) for x in operands]
        if isinstance(result, bool) and None in exprs:  # a size of a tensor made in the graph
            exprs = [self.output.size_expression(x) if isinstance(x, SymIntVariable) else e
                     for x, e in zip(operands, exprs)]
        expr = None
        if all(e is not None for e in exprs):
            sym = _SYMBOLS.get(fn)
            expr = (f"({exprs[0]} {sym} {exprs[1]})" if sym and len(exprs) == 2 else
                    f"(-{exprs[0]})" if fn is operator.neg else
                    f"math.{fn.__name__}({exprs[0]})" if getattr(fn, "__module__", "") == "math"
                    and len(exprs) == 1 else None)
        if isinstance(result, bool):
            if expr is None:
                raise Unsupported("a comparison of sizes computed inside the graph is used "
                                  "as a Python bool (dynamic shapes)")
            self.guards.SHAPE_ENV(expr if result else f"not {expr}", "branch on a size")
            return ConstantVariable(result)
        if not isinstance(result, (int, float)):
            raise Unsupported(f"{fn.__name__} on a symbolic size gave a {type(result).__name__}")
        # ints and floats computed from sizes stay in the graph (``size * 2``,
        # ``math.sqrt(size)``): correct for every size, no guard needed
        node = self.output.graph.call_function(fn, tuple(x.as_proxy() for x in operands))
        node.meta["source"] = self.current_source_line()
        self.output.created.append(node)
        return SymIntVariable(node, result, expr)

    # --- inlining ---------------------------------------------------------------------------
    def inline_user_function(self, fn, args, kwargs, fn_source: Source | None = None):
        if fn in trace_rules.REPORTING:  # ``logger.warning(...)``: made after the graph
            return self.defer_call(UserFunctionVariable(fn, fn_source), args, kwargs)
        if fn in trace_rules.USER_GRAPH_BREAKS and not str(
                self.frames[-1].globals.get("__name__", "")).startswith("torch."):
            # ``torch._dynamo.graph_break()``: a no-op in Python (inlined, it would vanish),
            # a break by request when compiled -- the call runs in the break, as it does in
            # torch.compile. Torch's own calls are requests to PyTorch's AOTAutograd, not
            # the user's: an optimizer step's ``_use_grad`` breaks so that the update is
            # compiled as an inference graph, which ours is in one graph too
            # (``test_a_function_no_gradient_leaves_compiles_as_inference``) -- there they
            # stay no-ops, and the step is one graph
            msg = [a.as_python_constant() for a in [*args, *kwargs.values()]
                   if a.is_python_constant()]
            raise Unsupported("torch._dynamo.graph_break() called: a graph break the user "
                              "asked for" + (f" ({msg[0]})" if msg and msg[0] else ""))
        if fn.__dict__.get("_torchdynamo_disable"):
            inner = getattr(fn, "__wrapped__", None)
            if traced_like_user_code(fn.__module__ or "") and \
                    isinstance(inner, types.FunctionType):
                # torch.compile, once used, marks every optimizer's ``_init_group`` disabled:
                # its own tracer runs it at trace time. Not a user's choice: traced as is
                return self.inline_user_function(
                    inner, args, kwargs,
                    fn_source=AttrSource(fn_source, "__wrapped__") if fn_source else None)
            # ``@torch.compiler.disable`` (torch._dynamo.disable): it runs, uncompiled, in
            # the break -- one break, never a trace into torch's wrapper
            raise Unsupported(f"{fn.__qualname__} is marked torch.compiler.disable: it runs "
                              "uncompiled")
        code = fn.__code__
        if code.co_flags & CO_GENERATOR_LIKE & ~inspect.CO_GENERATOR:
            raise Unsupported(f"calling coroutine function {fn.__qualname__}")
        if len(self.frames) > config.max_inline_depth:
            raise Unsupported("inlining too deep (recursion?)")
        # Its defaults and closure cells are reached through the function, and guarded
        # there (``G['helper'].__defaults__[0]``, ``G['helper'].__closure__[0]
        # .cell_contents``); a method found on a class has no source of its own: then the
        # function itself is the base (``K[3].__closure__[0]``). Constant defaults of such
        # a method are taken as they are (the class is guarded, they are its own).
        base = fn_source if fn_source is not None else ObjectSource(fn)

        def sub(attr: str, key: Any) -> Source:
            return GetItemSource(AttrSource(base, attr), key)

        def default(value: Any, source: Source) -> VariableTracker:
            if fn_source is None and is_constant_value(value) and \
                    trace_rules.immutable_constant(value):
                return ConstantVariable(value)
            return self.wrap_nested(value, source)
        defaults = None
        if fn.__defaults__:
            defaults = [default(v, sub("__defaults__", i))
                        for i, v in enumerate(fn.__defaults__)]
        kwdefaults = None
        if fn.__kwdefaults__:
            kwdefaults = {k: default(v, sub("__kwdefaults__", k))
                          for k, v in fn.__kwdefaults__.items()}
        f_locals = self._bind(code, args, kwargs, tuple(defaults or ()), kwdefaults,
                              fn.__qualname__)
        for i, (name, cell) in enumerate(zip(code.co_freevars, fn.__closure__ or ())):
            f_locals[name] = self.builder.closure_cell(cell, sub("__closure__", i))
        return self._run_inlined(Frame(code, fn.__globals__, f_locals, fn.__qualname__),
                                 (UserFunctionVariable(fn, fn_source), list(args), kwargs))

    def inline_nested_function(self, fn: NestedUserFunctionVariable, args, kwargs):
        code = fn.code
        if code.co_flags & CO_GENERATOR_LIKE & ~inspect.CO_GENERATOR:
            raise Unsupported(f"calling coroutine function {fn.qualname}")
        if len(self.frames) > config.max_inline_depth:
            raise Unsupported("inlining too deep (recursion?)")
        defaults = tuple(self.unpack(fn.defaults)) if fn.defaults is not None else ()
        kwdefaults = dict(fn.kwdefaults.items) if fn.kwdefaults is not None else None
        f_locals = self._bind(code, args, kwargs, defaults, kwdefaults, fn.qualname)
        cells = self.unpack(fn.closure) if fn.closure is not None else []
        for name, cell in zip(code.co_freevars, cells):
            f_locals[name] = cell
        return self._run_inlined(Frame(code, fn.f_globals, f_locals, fn.qualname),
                                 (fn, list(args), kwargs))

    def _bind(self, code, args, kwargs, defaults, kwdefaults, name: str) -> dict:
        """The inlined function's locals; arguments that do not bind raise CPython's
        TypeError in the program, which its ``try: f(*args) / except TypeError`` may catch."""
        try:
            return bind_arguments(code, list(args), dict(kwargs), defaults, kwdefaults, name,
                                  self.build_tuple, self.build_map_from_dict)
        except TypeError as e:
            raise TracedException(e) from None

    def _run_inlined(self, frame: Frame, call: tuple[VariableTracker, list, dict]):
        if frame.code.co_flags & inspect.CO_GENERATOR:
            # calling a generator function runs nothing yet: the generator is its frame,
            # resumed each time its consumer asks for an item (``resume_generator``)
            return GeneratorVariable(frame, call)
        self.frames.append(frame)
        try:
            return self.run(frame)
        finally:
            self.frames.pop()

    def RETURN_GENERATOR(self, f, inst):
        f.push(ConstantVariable(None))  # what the first resume "sends"; POP_TOP drops it

    def YIELD_VALUE(self, f, inst):
        if not any(f is g for g in self.frames[1:]) or not f.code.co_flags & \
                inspect.CO_GENERATOR:
            raise Unsupported("yield outside a traced generator")
        return _YIELD  # the value stays on top of the stack for resume_generator

    def GET_YIELD_FROM_ITER(self, f, inst):
        f.push(self.get_iter(f.pop()))

    def SEND(self, f, inst):
        # ``yield from it``: hand the sent value to ``it`` and yield what it yields (the
        # YIELD_VALUE that follows); when ``it`` returns, its value is the expression's
        value, receiver = f.pop(), f.stack[-1]
        try:
            if isinstance(receiver, GeneratorVariable):
                result = self.resume_generator(receiver, value)
            elif value.is_python_constant() and value.as_python_constant() is None:
                result = self.iter_next(receiver)
            else:
                raise Unsupported(f"send() to {receiver} inside yield from")
        except StopIteration as stop:
            returned = stop.args[0] if stop.args else ConstantVariable(None)
            if PY < (3, 12):
                f.pop()  # 3.11 replaces the receiver; 3.12+ leave it for END_SEND
            f.push(returned)
            f.ip = inst.target
            return
        f.push(result)

    def END_SEND(self, f, inst):
        value = f.pop()
        f.pop()  # the receiver
        f.push(value)


_YIELD = object()  # a handler's way of saying "the generator frame yielded"


def _raw_constant(value: Any) -> bool:
    """A plain Python value an opcode handler passes to ``call`` (a class, a tuple of
    them), not a tracker or the traced code's exception."""
    return not isinstance(value, (VariableTracker, TracedException))


def _python_method(obj: UserDefinedObjectVariable, name: str) -> bool:
    """Does the object's class define ``name`` in Python (so that it can be inlined)?"""
    return isinstance(inspect.getattr_static(type(obj.value), name, None), types.FunctionType)


def _user_module_method(obj: VariableTracker, name: str) -> TypeGuard[NNModuleVariable]:
    """A module whose class (outside torch: torch.nn's containers have their own rules)
    defines ``name`` in Python: a container of the user's (tltorch's ``FactorList``
    iterates through its ``__getitem__`` and ``__len__``), run as the class wrote it."""
    if not isinstance(obj, NNModuleVariable):
        return False
    method = inspect.getattr_static(type(obj.value), name, None)
    return isinstance(method, types.FunctionType) and not in_torch(method.__module__)


def _dict_subclass_method(obj: VariableTracker, name: str) -> bool:
    """A dict of a subclass that defines ``name`` in Python: ``Counter.__add__``,
    ``__or__``, ``__neg__`` (the pure-Python standard library, inlined like user code)."""
    if not isinstance(obj, ConstDictVariable) or obj.dict_cls is dict:
        return False
    return isinstance(inspect.getattr_static(obj.dict_cls, name, None), types.FunctionType)


def _python_context_manager(mgr: VariableTracker) -> bool:
    """An object whose class defines __enter__ and __exit__ in Python (traced by inlining)."""
    return isinstance(mgr, UserDefinedObjectVariable) and all(
        isinstance(inspect.getattr_static(type(mgr.value), name, None), types.FunctionType)
        for name in ("__enter__", "__exit__"))


def _is_with_exit(vt: Any) -> bool:
    """The bound __exit__ that BEFORE_WITH left on the stack for a context manager written
    in Python: its __enter__ was traced, so the real frame is not inside it."""
    return isinstance(vt, UserMethodVariable) and vt.fn.__name__ == "__exit__"


def _generic_class(cls: Any) -> bool:
    """A builtin or standard-library class whose subscription makes a type annotation
    (``list[int]``, ``collections.abc.Sequence[int]``): ``__class_getitem__`` there only
    builds a ``types.GenericAlias``."""
    return isinstance(cls, type) and "__class_getitem__" in dir(cls) and \
        cls.__module__ in ("builtins", "collections", "collections.abc", "typing")


def _typing_argument(vt: VariableTracker) -> Any:
    """The Python value of a typing subscript's argument: a class (``torch.Tensor``,
    ``int``), a typing construct, a constant (``None``, ``...``, a forward reference
    ``"Tensor"``, ``Literal[1]``'s ``1``), or a tuple of them."""
    if isinstance(vt, BaseListVariable):
        return tuple(_typing_argument(i) for i in vt.items)
    if isinstance(vt, UserDefinedObjectVariable):
        if is_typing_form(vt.value) and not vt.pending:
            return vt.value
        raise Unsupported(f"{vt} as a type argument")
    value = vt.as_python_constant()
    if not (is_constant_value(value) or value is Ellipsis or isinstance(value, type)
            or is_typing_form(value)):
        raise Unsupported(f"{value!r} as a type argument")
    return value


def _store_tensor_data(t: TensorVariable, value: VariableTracker) -> None:
    """``t.data = value``. When ``value`` is ``t.data`` itself, through calls that gave it
    back unchanged (pytorch-metric-learning's ``self.W.data = to_device(self.W.data,
    device, dtype)``: ``.to`` of the same device and dtype returns its tensor), ``t`` keeps
    its storage and metadata: nothing happens. Any other tensor replaces ``t``'s storage:
    ``t`` then aliases ``value``, and views of its old storage keep the old values -- not
    said by a graph of values (a ``copy_`` would be silently wrong for such a view), so a
    break, as it was."""
    node = value.node if isinstance(value, TensorVariable) else None
    while node is not None and node is not t.node and node.op == "call_method" and \
            node.target == "detach":   # (under no_grad, ``.data`` detaches a detach)
        node = node.args[0]
    if isinstance(value, TensorVariable) and node is not None and node is t.node:
        a, b = t.fake, value.fake
        if (a.shape, a.stride(), a.dtype, a.device) == (b.shape, b.stride(), b.dtype,
                                                        b.device):
            return None
    raise Unsupported("assignment to tensor.data of another tensor (its storage replaced: "
                      "an aliasing a graph of values does not say)")


def _identical(a: VariableTracker, b: VariableTracker) -> bool:
    if a is b:
        return True
    if a.is_python_constant() and b.is_python_constant() and isinstance(
            a, ConstantVariable) and isinstance(b, ConstantVariable):
        return a.value is b.value
    va, vb = getattr(a, "value", _Missing), getattr(b, "value", _Missing)
    if va is not _Missing and vb is not _Missing and not isinstance(a, ConstantVariable) \
            and not isinstance(b, ConstantVariable):
        return va is vb
    if isinstance(a, PartialVariable) or isinstance(b, PartialVariable):
        # each ``functools.partial(...)`` is a new object, even of the same function and
        # arguments; two trackers of partials may still hold one object (read twice)
        if type(a) is not type(b) or a.source is None or b.source is None:
            return False   # (one of them made here, so a new object)
        if a.source.name() == b.source.name():
            return True
        raise Unsupported("`is` on two functools.partial objects read from different "
                          f"places ({a.source.name()}, {b.source.name()}): whether they are "
                          "one object is not tracked")
    fa, fb = getattr(a, "fn", _Missing), getattr(b, "fn", _Missing)
    if fa is not _Missing and fa is fb and not isinstance(fa, VariableTracker):
        return True
    return False


class _Missing:
    pass


def _backend_settings(vt: VariableTracker) -> bool:
    """Is ``vt`` an object of a ``torch.backends`` module's classes that holds kernel
    settings (``torch.backends.cuda.matmul``, a ``cuBLASModule``)? (The modules themselves,
    ``torch.backends.cudnn``, refuse writes once PyTorch froze their flags: not these.)"""
    if not isinstance(vt, UserDefinedObjectVariable):
        return False
    module = getattr(type(vt.value), "__module__", "") or ""
    return module.startswith("torch.backends.")


def _fixed_equality(vt: VariableTracker) -> Any:
    """The object behind ``vt`` when ``==`` on it is CPython's own and cannot change: its
    class (a function's, a class's, a module's, None's) keeps object's identity ``__eq__``,
    or it is a builtin function (equal when it wraps the same C function for the same
    object). ``_Missing`` otherwise."""
    if isinstance(vt, ConstantVariable):
        return None if vt.value is None else _Missing
    if isinstance(vt, (TensorVariable, SymIntVariable)):
        return _Missing
    value = getattr(vt, "value", getattr(vt, "fn", _Missing))
    if isinstance(value, VariableTracker):  # (a partial's function: not the object itself)
        return _Missing
    cls = type(value)
    if value is not _Missing and (cls.__eq__ is object.__eq__ and cls.__ne__ is object.__ne__
                                  or cls is types.BuiltinFunctionType):
        return value
    return _Missing


# builtin types whose ``__eq__`` / ``__ne__`` give NotImplemented for an object of another
# kind (no numeric tower, no coercion): against an object that keeps object's own, ``==``
# is identity
_OWN_KIND_EQUALITY = (str, bytes, int, float, complex, bool, type(None), tuple, frozenset,
                      range, slice)


def _equal_by_identity(a: VariableTracker, b: VariableTracker) -> bool:
    """Whether ``a == b`` is ``a is b`` in CPython: each side's class keeps object's
    ``__eq__``/``__ne__`` (a ``functools.partial``), or one side does and the other is a
    builtin constant whose ``__eq__`` refuses any other kind."""
    kinds = []
    for vt in (a, b):
        if isinstance(vt, (TensorVariable, SymIntVariable)):
            return False
        try:
            kinds.append(vt.python_type())
        except Unsupported:
            return False
    identity = [k.__eq__ is object.__eq__ and k.__ne__ is object.__ne__ for k in kinds]
    own_kind = [isinstance(vt, ConstantVariable) and type(vt.value) in _OWN_KIND_EQUALITY
                for vt in (a, b)]
    return identity[0] and (identity[1] or own_kind[1]) or identity[1] and own_kind[0]


def _sequence_like(seq: BaseListVariable, items: list) -> BaseListVariable:
    """What ``+`` or ``*`` of a sequence gives: a list of a list, a deque of a deque (its
    maxlen kept), a plain tuple of any tuple (a namedtuple or ``torch.Size`` plus a tuple is
    a tuple)."""
    if isinstance(seq, DequeVariable):
        return type(seq)(items, maxlen=seq.maxlen)
    return ListVariable(items) if isinstance(seq, ListVariable) else TupleVariable(items)


def _known_constant(vt: TensorVariable) -> torch.Tensor | None:
    """The value of a tensor the graph makes from Python constants alone
    (``torch.as_tensor(2)``, ``torch.tensor(1) + 2``), as its fake tensor tracks it -- or
    None when any node it comes from reads an input (a size of one too: the fake value of a
    size is only its example), is not a tensor, or was written in place (conservatively,
    whatever wrote it)."""
    known = getattr(vt.fake, "constant", None)
    if known is None:
        return _evaluate_from_constants(vt.node)
    seen, todo = set(), [vt.node]
    while todo and known is not None:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        example = node.meta.get("example_value")
        if node.op in ("placeholder", "get_attr") or not isinstance(
                example, torch.Tensor) or example._version:
            return None
        todo.extend(node.all_input_nodes)
    return known


def _evaluate_from_constants(node: Node, limit: int = 64) -> torch.Tensor | None:
    """The value of a small tensor the graph computes from Python constants alone, by ops
    that draw no random numbers (compressai's ``torch.cat((torch.tensor([1, 0]),
    torch.arange(2, x.ndim)))`` and the items unpacked from it), computed now on real
    tensors: the fake tensor tracks a constant only for a literal. None when any node on
    the way reads an input or a size, draws, was written in place, is not a tensor, or
    holds more than ``limit`` elements."""
    values: dict[Node, Any] = {}

    def small(example: Any) -> bool:
        if isinstance(example, (tuple, list)):
            return all(small(e) for e in example)
        return isinstance(example, torch.Tensor) and not example._version and \
            example.numel() <= limit

    def run(n: Node) -> Any:
        if n not in values:
            if n.op not in ("call_function", "call_method") or is_random(n) or \
                    not small(n.meta.get("example_value")):
                raise LookupError(n)
            args = map_aggregate(n.args, lambda a: run(a) if isinstance(a, Node) else a)
            kwargs = map_aggregate(n.kwargs, lambda a: run(a) if isinstance(a, Node) else a)
            fn = getattr(args[0], n.target) if n.op == "call_method" else n.target
            values[n] = fn(*args[1:], **kwargs) if n.op == "call_method" else fn(*args, **kwargs)
        return values[n]

    try:
        with torch.no_grad():
            value = run(node)
    except Exception:   # (LookupError: not made from constants alone)
        return None
    example = node.meta.get("example_value")
    if not isinstance(value, torch.Tensor) or not isinstance(example, torch.Tensor) or \
            value.shape != example.shape or \
            value.dtype != example.dtype:
        return None
    return value


# what may stand between a branch and the raise it leads to: building the exception and its
# message (loads, calls, f-strings), never a write, a jump or a return
_BUILDS_AN_EXCEPTION = {
    "NOP", "LOAD_GLOBAL", "LOAD_CONST", "LOAD_FAST", "LOAD_DEREF", "LOAD_ATTR", "LOAD_METHOD",
    "LOAD_ASSERTION_ERROR", "LOAD_CLOSURE", "PUSH_NULL", "CALL", "CALL_KW",
    "CALL_FUNCTION_EX", "BUILD_STRING", "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP",
    "BUILD_CONST_KEY_MAP", "FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC",
    "CONVERT_VALUE", "BINARY_OP", "BINARY_SUBSCR", "COPY", "SWAP", "LIST_EXTEND",
    "LIST_APPEND", "DICT_MERGE", "DICT_UPDATE", "UNARY_NEGATIVE", "UNARY_NOT",
}


# what may stand between the operands of ``a or b`` in front of a raise: the next operand's
# computation (loads, calls, operators), never a write, a jump or a return
_COMPUTES_AN_OPERAND = {
    "NOP", "LOAD_GLOBAL", "LOAD_CONST", "LOAD_FAST", "LOAD_DEREF", "LOAD_ATTR", "LOAD_METHOD",
    "PUSH_NULL", "CALL", "CALL_KW", "BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "IS_OP",
    "CONTAINS_OP", "UNARY_NEGATIVE", "UNARY_NOT", "UNARY_INVERT", "COPY", "SWAP",
    "BUILD_TUPLE",
}


def _or_before_raise(instructions: list, index: int, target: int) -> bool:
    """Whether the code from ``index`` on is the rest of ``a or b [or c]``: each operand
    computed, then a jump to ``target`` when true, and the last falling into a raise."""
    for i in range(index, min(len(instructions), index + 200)):
        inst = instructions[i]
        if inst.opname == "POP_JUMP_IF_TRUE" and _same_continuation(instructions,
                                                                    inst.target, target):
            return _only_raises(instructions, i + 1) or _or_before_raise(instructions, i + 1,
                                                                         target)
        if inst.opname not in _COMPUTES_AN_OPERAND:
            return False
    return False


def _same_continuation(instructions: list, a: int, b: int) -> bool:
    """Whether the code at ``a`` and at ``b`` is one continuation: the same index, or the
    same instructions up to a return (CPython copies a function's short ending to each
    branch that reaches it: ``assert a or b`` at the end of a function jumps to two copies
    of ``return None``)."""
    if a == b:
        return True
    for i, j in zip(range(a, len(instructions)), range(b, len(instructions))):
        x, y = instructions[i], instructions[j]
        if (x.opname, x.arg) != (y.opname, y.arg) or x.opname in JUMP_OPS:
            return False
        if x.opname in ("RETURN_VALUE", "RETURN_CONST"):
            return True
    return False


def _only_raises(instructions: list, index: int) -> bool:
    """Whether the code from ``index`` on only builds an exception and raises it."""
    for inst in instructions[index:index + 200]:
        if inst.opname == "RAISE_VARARGS":
            return inst.arg != 0   # (a bare ``raise`` re-raises what is being handled)
        if inst.opname not in _BUILDS_AN_EXCEPTION:
            return False
    return False


_SET_OPERATORS = {
    operator.or_: "__or__", operator.and_: "__and__", operator.sub: "__sub__",
    operator.xor: "__xor__", operator.ior: "__ior__", operator.iand: "__iand__",
    operator.isub: "__isub__", operator.ixor: "__ixor__", operator.eq: "__eq__",
    operator.ne: "__ne__", operator.le: "__le__", operator.lt: "__lt__",
    operator.ge: "__ge__", operator.gt: "__gt__",
}


def _base_kind(seq: BaseListVariable) -> type:
    """list, tuple or deque: the sequences ``+`` joins only to their own kind."""
    return next(k for k in (collections.deque, list, tuple) if issubclass(seq.python_cls, k))


# trackers of values whose class is known and whose ``__class__`` is object's slot (unless
# the class overrides it: checked where it is read)
_TYPED_BY_CLASS = (TensorVariable, SymIntVariable, BaseListVariable, ConstDictVariable,
                   SetVariable)
_OBJECT_CLASS_SLOT = vars(object)["__class__"]


def _python_class(vt: VariableTracker) -> type | None:
    """The class of an object of a Python class (a tracker of one); None otherwise."""
    if isinstance(vt, NNModuleVariable):   # a module of the user's class
        return type(vt.value) if not in_torch(type(vt.value).__module__) else None
    if isinstance(vt, ConstDictVariable) and vt.dict_cls is not dict:
        return vt.dict_cls   # a dict subclass (``Counter``): its Python operators
    return type(vt.value) if isinstance(vt, UserDefinedObjectVariable) else None


# operator -> (method, reflected method), as CPython looks them up
_DUNDERS = {
    operator.add: ("__add__", "__radd__"), operator.sub: ("__sub__", "__rsub__"),
    operator.mul: ("__mul__", "__rmul__"), operator.truediv: ("__truediv__", "__rtruediv__"),
    operator.floordiv: ("__floordiv__", "__rfloordiv__"), operator.mod: ("__mod__", "__rmod__"),
    operator.pow: ("__pow__", "__rpow__"), operator.matmul: ("__matmul__", "__rmatmul__"),
    operator.and_: ("__and__", "__rand__"), operator.or_: ("__or__", "__ror__"),
    operator.xor: ("__xor__", "__rxor__"), operator.lshift: ("__lshift__", "__rlshift__"),
    operator.rshift: ("__rshift__", "__rrshift__"), operator.eq: ("__eq__", "__eq__"),
    operator.ne: ("__ne__", "__ne__"), operator.lt: ("__lt__", "__gt__"),
    operator.le: ("__le__", "__ge__"), operator.gt: ("__gt__", "__lt__"),
    operator.ge: ("__ge__", "__le__"),
}
_UNARY_DUNDERS = {operator.neg: "__neg__", operator.pos: "__pos__",
                  operator.invert: "__invert__", abs: "__abs__"}
_UNARY_SYMBOLS = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}
# ``a += b``: ``__iadd__`` first, then what ``a + b`` would do
_INPLACE = {operator.iadd: ("__iadd__", operator.add), operator.isub: ("__isub__", operator.sub),
            operator.imul: ("__imul__", operator.mul),
            operator.itruediv: ("__itruediv__", operator.truediv),
            operator.ior: ("__ior__", operator.or_), operator.iand: ("__iand__", operator.and_)}
_DUNDERS.update({op: _DUNDERS[plain] for op, (_, plain) in _INPLACE.items()})
# ``a += b`` of an array: in place on its tensor (on a NumPy scalar, the plain operator)
_NDARRAY_INPLACE = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow, operator.imatmul: operator.matmul,
    operator.iand: operator.and_, operator.ior: operator.or_, operator.ixor: operator.xor}


def _in_loop(frame: Frame, ip: int) -> bool:
    """Does a backward jump later in the code land at or before ``ip`` (inside a loop)?"""
    for inst in frame.instructions[ip:]:
        if inst.opname in JUMP_OPS and inst.target is not None and inst.target <= ip:
            return True
    return False
