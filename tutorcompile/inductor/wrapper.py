"""The wrapper: a readable Python function that allocates buffers and calls the kernels.

For each kernel the scheduler chose, in order, the wrapper allocates the buffers it stores,
calls it, and frees every buffer whose last reader has run. *Memory planning*: a buffer
that is freed goes into a pool; a later allocation of the same size, strides and dtype takes
it from the pool instead of asking the allocator (``buf5 = buf2  # reuse``). Extern kernels
are PyTorch calls written out as such (``buf3 = prims.matmul(buf1, w)``); a view that a
PyTorch call or the caller needs as a tensor is rebuilt with the view prims.

``WrapperCodegen.generate()`` returns the source (``output_code``) and the globals to run it
with; the source is what a learner reads to see what the compiler made of their function.

Mirrors: torch/_inductor/codegen/wrapper.py (``PythonWrapperCodegen``, ``AllocateLine``,
``FreeIfNotReusedLine``, ``ReuseLine``).
"""

from __future__ import annotations

import importlib
import keyword
from typing import Any

import torch

from ..fx.node import map_aggregate, qualified_name
from ..ops import Prim, prims
from . import ir
from .scheduler import Scheduler


def _pyrepr(value: Any) -> str:
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_pyrepr(v) for v in value)
        if isinstance(value, tuple):
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return f"[{inner}]"
    if isinstance(value, float) and value != value:
        return "float('nan')"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "float('inf')" if value > 0 else "float('-inf')"
    return repr(value)


def _is_literal(value: Any) -> bool:
    """Values whose repr is valid Python that rebuilds them."""
    if value is None or value is Ellipsis or isinstance(value, (bool, int, float, str,
                                                                  torch.dtype, torch.device,
                                                                  slice)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_literal(v) for v in value)
    return False


class KernelStep:
    def __init__(self, group, call, inputs: list[ir.Buffer], outputs: list[ir.Buffer],
                 source: str):
        self.group = group
        self.call = call
        self.inputs = inputs
        self.outputs = outputs
        self.source = source


class WrapperCodegen:
    """Build the wrapper for a scheduled graph; ``compile_kernel(plan, name)`` makes one
    kernel and returns ``(callable, input buffers, output buffers)``."""

    def __init__(self, scheduler: Scheduler, compile_kernel, reuse: bool = True):
        self.scheduler = scheduler
        self.lowering = scheduler.lowering
        self.compile_kernel = compile_kernel
        self.reuse = reuse
        self.globals: dict[str, Any] = {"torch": torch, "prims": prims,
                                        "empty_strided": torch.empty_strided}
        self.steps: list[tuple[str, Any]] = []
        self.kernel_sources: dict[str, str] = {}
        self.view_names: dict[int, str] = {}
        self.lines: list[str] = []
        self.reused = 0

    # -- expressions for IR values -------------------------------------------------------
    def value_expr(self, value: Any, emit: list[str]) -> str:
        if isinstance(value, ir.View):
            key = id(value)
            if key not in self.view_names:
                base = self.value_expr(value.base, emit)
                name = f"view_{value.node.name}" if value.node is not None else f"view{key}"
                rest = ", ".join(self.value_expr(a, emit) for a in value.node.args[1:])
                kw = "".join(f", {k}={self.value_expr(v, emit)}"
                             for k, v in value.node.kwargs.items())
                emit.append(f"{name} = prims.{value.node.target.name}({base}, {rest}{kw})")
                self.view_names[key] = name
            return self.view_names[key]
        if isinstance(value, ir.Buffer):
            return value.name
        if isinstance(value, (list, tuple)):
            inner = [self.value_expr(v, emit) for v in value]
            if isinstance(value, tuple):  # (x,) needs its comma; () must not have one
                return f"({', '.join(inner)},)" if inner else "()"
            return f"[{', '.join(inner)}]"
        if isinstance(value, dict):
            items = [f"{k!r}: {self.value_expr(v, emit)}" for k, v in value.items()]
            return "{" + ", ".join(items) + "}"
        if _is_literal(value):
            return _pyrepr(value)
        # any other object (a function, a helper object of stage 4) is passed by name
        for name, known in self.globals.items():
            if known is value and name.startswith("const_"):
                return name
        name = f"const_{sum(n.startswith('const_') for n in self.globals)}"
        self.globals[name] = value
        return name

    def extern_callee(self, ext: ir.ExternKernel) -> str:
        if isinstance(ext.kernel, Prim):
            return f"prims.{ext.kernel.name}"
        path = qualified_name(ext.kernel)
        if path is not None and path.split(".")[0] in ("torch", "operator", "math"):
            root = path.split(".")[0]
            self.globals.setdefault(root, importlib.import_module(root))
            return path
        name = f"extern_{getattr(ext.kernel, '__name__', 'call')}_{ext.name}"
        self.globals[name if name.isidentifier() else f"extern_{ext.name}"] = ext.kernel
        return name if name.isidentifier() else f"extern_{ext.name}"

    # -- the whole function --------------------------------------------------------------
    def generate(self) -> str:
        sched = self.scheduler
        steps = []
        for group in sched.groups:
            if group.is_extern:
                steps.append(("extern", group))
            else:
                plan = sched.plan(group.buffers)
                call, ins, outs = self.compile_kernel(plan, group.name)
                self.globals[group.name] = call
                self.kernel_sources[group.name] = call.source
                steps.append(("kernel", KernelStep(group, call, ins, outs, call.source)))
        # last step that reads each buffer (outputs are never freed)
        last_use: dict[str, int] = {}
        for i, (kind, step) in enumerate(steps):
            reads = [b.name for b in step.inputs] if kind == "kernel" else \
                sched.reads[step.buffers[0].name]
            for r in reads:
                last_use[r] = i
        keep = set(sched.output_names) | {b.name for b in self.lowering.graph_inputs if b}
        params = [self.param_name(b, i) for i, b in enumerate(self.lowering.graph_inputs)]
        out = [f"def call({', '.join(params)}):"]
        body: list[str] = []
        pool: dict[tuple, list[str]] = {}
        free_line: dict[str, int] = {}
        for i, (kind, step) in enumerate(steps):
            if kind == "extern":
                ext: ir.ExternKernel = step.buffers[0]
                body.append(f"# {step.name}: {ext.reason} "
                            f"(graph node {', '.join(o.name for o in ext.origins)})")
                emit: list[str] = []
                args = [self.value_expr(a, emit) for a in ext.args]
                kwargs = [f"{k}={self.value_expr(v, emit)}" for k, v in ext.kwargs.items()]
                body.extend(emit)
                # kernels read extern results as contiguous: make sure they are (free if so)
                call = f"{self.extern_callee(ext)}({', '.join(args + kwargs)})"
                if not ext.multi_output:
                    call += ".contiguous()"
                body.append(f"{ext.name} = {call}")
            else:
                origin = []
                for b in step.group.buffers:
                    origin += [o.name for o in b.origins if o.name not in origin]
                body.append(f"# {step.group.name}: graph nodes {', '.join(origin)}")
                for b in step.outputs:
                    key = (b.layout.size, b.layout.stride, b.layout.dtype, b.layout.device)
                    if self.reuse and pool.get(key):
                        old = pool[key].pop()
                        body[free_line.pop(old)] = None  # not freed after all: reused
                        body.append(f"{b.name} = {old}; del {old}  # reuse")
                        self.reused += 1
                    else:
                        body.append(f"{b.name} = empty_strided({_pyrepr(b.layout.size)}, "
                                    f"{_pyrepr(b.layout.stride)}, dtype={b.layout.dtype}, "
                                    f"device={_pyrepr(b.layout.device)})")
                args = [b.name for b in step.inputs + step.outputs]
                body.append(f"{step.group.name}({', '.join(args)})")
            # Only memory this function allocated may be reused: a PyTorch call that is not a
            # prim may return a view of an input, which must never be overwritten.
            freed = [n for n, last in last_use.items() if last == i and n not in keep
                     and n in sched.by_name and self.owns_memory(sched.by_name[n])]
            for n in freed:
                b = sched.by_name[n]
                key = (b.layout.size, b.layout.stride, b.layout.dtype, b.layout.device)
                pool.setdefault(key, []).append(n)
                body.append(f"del {n}")
                free_line[n] = len(body) - 1
        emit = []
        leaves: list[str] = []
        map_aggregate(self.lowering.outputs,
                      lambda v: leaves.append(self.value_expr(v, emit)))
        body.extend(emit)
        body.append(f"return ({', '.join(leaves)}{',' if len(leaves) == 1 else ''})")
        self.lines = out + ["    " + line for line in body if line is not None]
        return "\n".join(self.lines) + "\n"

    @staticmethod
    def owns_memory(buffer: ir.Buffer) -> bool:
        return isinstance(buffer, ir.ComputedBuffer) or (
            isinstance(buffer, ir.ExternKernel) and isinstance(buffer.kernel, Prim))

    @staticmethod
    def param_name(buffer: ir.InputBuffer | None, i: int) -> str:
        if buffer is None:
            return f"_arg{i}"
        name = buffer.name
        return name if name.isidentifier() and not keyword.iskeyword(name) else f"_arg{i}"
