"""Scan kernels: ``sequential_scan`` with a pointwise ``combine_fn``, in C++ or Triton.

Once its length is a symbol, Mamba's selective scan reaches stage 5 as one
:func:`~tutorcompile.ops.scan.sequential_scan` node (see ``dynamo/variables/
higher_order_ops.py``). Run by PyTorch it is a Python loop of a few small ops per position;
when ``combine_fn`` is made of pointwise ops only, the whole scan is one kernel instead,
with the length an argument like any symbolic size. The leaves are contiguous, viewed as
``outer x n x inner`` around the scan dimension; the C++ kernel::

    for (int64_t x0 = 0; x0 < outer; x0++)              // the dims before the scan dim
        for (int64_t step = 1; step < n; step++) {      // in order: each step reads the last
            const int64_t row = (x0 * n + step) * inner, prev = row - inner;
            #pragma omp simd                            // the dims after it: independent
            for (int64_t x1 = 0; x1 < inner; x1++) {
                auto left0 = out0[prev + x1];  auto right0 = in0[row + x1];  ...
                out0[row + x1] = <combine_fn, spelled>;  ...
            }
        }

(step 0 copies the first position; ``reverse`` walks the rows the other way). The Triton
kernel gives each program a block of the ``outer x inner`` positions and loops over ``n``
in it, the running value in registers. Code generation never traces Python: ``combine_fn``
reaches it already a graph of prims over one-element tensors -- capture speculated it into
a body, and stage 4 decomposed that body (or traced a plain Python function, as
``aot_function``'s users hand it) when it decomposed the graph (``aot/prim_graph.py``,
``capture_combine_fn``), leaving a :class:`~tutorcompile.ops.scan.CombineFn` in the node --
and every prim is spelled by the same tables the fused kernels use. Anything else -- a
reduction or a view in ``combine_fn``, leaves of different shapes or dtypes, a dtype other
than float32 or float64 -- keeps PyTorch's loop, and the lowering says why.

The backward graph asks for the scan's gradient through stage 4's ``extern_backward`` (which
would replay the loop under PyTorch's autograd). Its kernel (:class:`ScanGradKernel`) runs
the scan again and then walks back over it with the *VJP rules* of ``combine_fn``'s prims
(stage 1's ``backward_graph``), spelled the same way: a reverse scan of gradients.

Mirrors: torch/_inductor/ir.py (``Scan``: a pointwise ``combine_fn`` over a scan range, which
Inductor's Triton backend lowers to ``tl.associative_scan``; its C++ backend has no
``BackendFeature.SCAN`` and falls back to the eager implementation) -- ours writes the
sequential loop in C++ and in Triton, and their gradients too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ...fx import Graph, Node
from ...ops import Prim
from ...ops.autodiff import backward_graph
from ...ops.scan import CombineFn
from ...ops.virtualized import TRITON_DTYPES, spell
from .. import config
from ..codecache import triton_module
from .cpp import CPP_TYPES, CppKernelCall
from .triton import TRITON_PRELUDE

SCAN_DTYPES = (torch.float32, torch.float64)
SIZE_ARGS = ["outer", "n", "inner"]


def _extents(shape: Sequence[int], dim: int) -> tuple[int, int, int]:
    """A contiguous tensor as ``outer x n x inner`` around its scan dimension."""
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


def _launcher(language: str, name: str, source: str, arg_names: list[str]):
    """``launch(tensors, (outer, n, inner))`` for a scan kernel's source."""
    if language == "cpp":
        kernel = CppKernelCall(name, source, arg_names, size_args=SIZE_ARGS)
        return lambda tensors, extents: kernel(*tensors, *extents)
    fn = getattr(triton_module(TRITON_PRELUDE + source + "\n", name), name)

    def launch(tensors, extents):
        outer, _, inner = extents
        xblock = config.scan_xblock
        fn[(max(1, -(-outer * inner // xblock)),)](*tensors, *extents, XBLOCK=xblock)
    return launch


class ScanKernel:
    """A compiled scan: ``kernel(xs)`` is ``sequential_scan(combine_fn, xs, dim, reverse)``
    for tensors ``xs`` of the dtype it was compiled for (any length, and any size in the
    other dimensions: they are arguments too)."""

    def __init__(self, name: str, language: str, source: str, packed: type | None,
                 num_leaves: int, dim: int):
        self.__name__ = name       # (the wrapper binds it under this name)
        self.language, self.source = language, source
        self.packed, self.num_leaves, self.dim = packed, num_leaves, dim
        k = range(num_leaves)
        self.launch = _launcher(language, name, source, [f"in{i}" for i in k] +
                                [f"out{i}" for i in k])

    def scan(self, leaves: list[torch.Tensor]) -> list[torch.Tensor]:
        """The scan of contiguous ``leaves``, one result each."""
        outs = [x.new_empty(x.shape) for x in leaves]
        extents = _extents(leaves[0].shape, self.dim)
        if extents[1]:
            self.launch([*leaves, *outs], extents)
        return outs

    def __call__(self, xs: Any) -> Any:
        outs = self.scan([x.contiguous() for x in (xs if self.packed else [xs])])
        return self.packed(outs) if self.packed else outs[0]

    def __repr__(self) -> str:
        return f"<{self.language} scan kernel {self.__name__}>"


class ScanGradKernel:
    """The gradient of a :class:`ScanKernel`, called as the backward graph calls PyTorch's
    (``extern_backward``): ``grad(grad_outputs, *inputs)`` gives one gradient per input.
    It recomputes the scan (the forward saved only its inputs), then walks it backwards::

        G[last] = g[last]
        G[i-1]  = g[i-1] + d combine / d left  at (out[i-1], x[i]), applied to G[i]
        dx[i]   =          d combine / d right at (out[i-1], x[i]), applied to G[i]
        dx[first] = G[first]

    -- the VJP rules of the combine's prims (stage 1), spelled like the forward."""

    def __init__(self, scan: ScanKernel, source: str, leaf_inputs: Sequence[int],
                 num_inputs: int, needs_grad: Sequence[bool], has_grad: Sequence[bool]):
        self.__name__ = f"{scan.__name__}_backward"
        self.scan, self.source = scan, source
        self.leaf_inputs, self.num_inputs = list(leaf_inputs), num_inputs
        self.needs_grad, self.has_grad = list(needs_grad), list(has_grad)
        k = range(scan.num_leaves)
        args = [f"in{i}" for i in k] + [f"out{i}" for i in k] + \
            [f"grad_out{i}" for i in k if has_grad[i]] + [f"grad_in{i}" for i in k]
        self.launch = _launcher(scan.language, self.__name__, source, args)

    def __call__(self, grad_outputs: Sequence[Any], *inputs: torch.Tensor) -> tuple:
        leaves = [inputs[i].contiguous() for i in self.leaf_inputs]
        outs = self.scan.scan(leaves)
        grads = [g.contiguous() for g, has in zip(grad_outputs, self.has_grad) if has]
        grad_in = [torch.empty_like(x) for x in leaves]
        extents = _extents(leaves[0].shape, self.scan.dim)
        if extents[1]:
            self.launch([*leaves, *outs, *grads, *grad_in], extents)
        result: list[Any] = [None] * self.num_inputs
        for i, g in zip(self.leaf_inputs, grad_in):
            if self.needs_grad[i]:
                result[i] = g if result[i] is None else result[i] + g
        return tuple(result)

    def __repr__(self) -> str:
        return f"<{self.scan.language} scan gradient kernel {self.__name__}>"


def combine_prims(combine_fn: Any, num_leaves: int, dtype: torch.dtype) -> Graph | str:
    """The graph of prims stage 4 captured for ``combine_fn`` (inputs: the left leaves,
    then the right ones, each a one-element tensor of ``dtype``), or why there is none.
    Nothing here traces Python: a function stage 4 did not capture keeps PyTorch's loop."""
    if not isinstance(combine_fn, CombineFn):
        return "combine_fn was not captured as prims before code generation (stage 4 " \
            "captures it when it decomposes the graph)"
    if combine_fn.dtypes != (dtype,) * num_leaves:
        return f"combine_fn was captured for {[str(d) for d in combine_fn.dtypes]}, not " \
            f"{num_leaves} x {dtype}"
    return combine_fn.prims


def spell_prims(graph: Graph, names: Sequence[str], dtype: torch.dtype, what: str,
                language: str = "cpp") -> tuple[list[str], list[str | None]] | str:
    """A graph of pointwise prims as ``language`` (``"cpp"`` or ``"triton"``): statements
    computing temporaries from its inputs (called ``names``, in order), and the expression
    of each output (None for an output that is None), or why it cannot be written so."""
    env: dict[Node, str] = {}
    lines: list[str] = []
    cpp = language == "cpp"

    def operand(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return ("true" if value else "false") if cpp else str(value)
        if isinstance(value, float):
            if not cpp:
                return f"float({str(value)!r})" if not math.isfinite(value) else repr(value)
            t = CPP_TYPES[dtype]
            if math.isinf(value):
                return f"{'-' if value < 0 else ''}std::numeric_limits<{t}>::infinity()"
            if math.isnan(value):
                return f"std::numeric_limits<{t}>::quiet_NaN()"
            return f"static_cast<{t}>({value!r})"
        if isinstance(value, int):
            return str(value)
        raise TypeError(type(value).__name__)
    placeholders = graph.placeholders
    if len(placeholders) != len(names):
        return f"{what} has {len(placeholders)} inputs, not {len(names)}"
    env.update(zip(placeholders, names))
    for node in graph.nodes:
        if node.op == "placeholder":
            continue
        elif node.op == "call_function":
            target = node.target
            if not isinstance(target, Prim) or not target.is_pointwise or \
                    getattr(target, language) is None:
                name = target.name if isinstance(target, Prim) else getattr(
                    target, "__name__", str(target))
                return f"{what} calls {name}, not a pointwise prim"
            meta = node.meta.get("tensor_meta")
            if meta is None or meta.dtype not in (dtype, torch.bool):
                return f"{what} computes in {getattr(meta, 'dtype', '?')}, not {dtype}"
            args = tuple(env[a] if isinstance(a, Node) else a for a in node.args)
            kwargs = {k: env[v] if isinstance(v, Node) else v for k, v in node.kwargs.items()}
            try:
                text = spell(getattr(target, language), args, kwargs, operand,
                             (CPP_TYPES if cpp else TRITON_DTYPES).__getitem__)
            except (TypeError, KeyError) as e:
                return f"{what}'s {target.name} has an argument {language} cannot spell ({e})"
            env[node] = f"tmp{len(lines)}"
            lines.append(f"auto {env[node]} = {text};" if cpp else f"{env[node]} = {text}")
        elif node.op == "output":
            results = node.args[0] if isinstance(node.args[0], (tuple, list)) else \
                [node.args[0]]
            spelled: list[str | None] = []
            for r in results:
                if r is None:
                    spelled.append(None)
                    continue
                meta = r.meta.get("tensor_meta") if isinstance(r, Node) else None
                if r not in env or meta is None or meta.dtype != dtype:
                    return f"{what} returns something other than a {dtype} tensor"
                spelled.append(env[r])
            return lines, spelled
        else:
            return f"{what} has a {node.op} node"
    return f"{what} returns nothing"


def _position(step: str, reverse: bool) -> str:
    """The position along the scan dimension of the ``step``-th step."""
    return f"n - 1 - ({step})" if reverse else step


def cpp_scan_source(name: str, num_leaves: int, dtype: torch.dtype, reverse: bool,
                    lines: Sequence[str], results: Sequence[str]) -> str:
    """The C++ forward kernel: leaves contiguous, viewed as ``outer x n x inner``."""
    t = CPP_TYPES[dtype]
    k = range(num_leaves)
    params = [f"const {t}* __restrict__ in{i}" for i in k] + \
        [f"{t}* __restrict__ out{i}" for i in k] + [f"int64_t {a}" for a in SIZE_ARGS]
    copies = [f"out{i}[row + x1] = in{i}[row + x1];" for i in k]
    step = [f"auto left{i} = out{i}[prev + x1];" for i in k] + \
        [f"auto right{i} = in{i}[row + x1];" for i in k] + list(lines) + \
        [f"out{i}[row + x1] = {r};" for i, r in zip(k, results)]
    return _cpp_loop_nest(name, params, f"an inclusive scan of {num_leaves} tensor(s)",
                          reverse, _position("0", reverse), copies, _position("step", reverse),
                          _position("step - 1", reverse),
                          "for (int64_t step = 1; step < n; step++)", step)


def cpp_scan_backward_source(name: str, num_leaves: int, dtype: torch.dtype,
                             reverse: bool, has_grad: Sequence[bool], lines: Sequence[str],
                             results: Sequence[str | None]) -> str:
    """The C++ gradient kernel (see :class:`ScanGradKernel`): ``grad_in`` holds the running
    gradient ``G`` of a position until its own gradient overwrites it."""
    t = CPP_TYPES[dtype]
    k = range(num_leaves)
    params = [f"const {t}* __restrict__ in{i}" for i in k] + \
        [f"const {t}* __restrict__ out{i}" for i in k] + \
        [f"const {t}* __restrict__ grad_out{i}" for i in k if has_grad[i]] + \
        [f"{t}* __restrict__ grad_in{i}" for i in k] + [f"int64_t {a}" for a in SIZE_ARGS]
    zero = f"static_cast<{t}>(0)"
    firsts = [f"grad_in{i}[row + x1] = {f'grad_out{i}[row + x1]' if has_grad[i] else zero};"
              for i in k]
    d_left, d_right = results[:num_leaves], results[num_leaves:]
    step = [f"auto left{i} = out{i}[prev + x1];" for i in k] + \
        [f"auto right{i} = in{i}[row + x1];" for i in k] + \
        [f"auto g{i} = grad_in{i}[row + x1];" for i in k] + list(lines) + \
        [f"grad_in{i}[row + x1] = {d or zero};" for i, d in zip(k, d_right)]
    for i, d in zip(k, d_left):   # G of the position before, from this one's
        terms = [f"grad_out{i}[prev + x1]"] * has_grad[i] + ([d] if d is not None else [])
        step.append(f"grad_in{i}[prev + x1] = {' + '.join(terms) or zero};")
    return _cpp_loop_nest(name, params, f"the gradient of a scan of {num_leaves} tensor(s)",
                          reverse, _position("n - 1", reverse), firsts,
                          _position("step", reverse), _position("step - 1", reverse),
                          "for (int64_t step = n - 1; step >= 1; step--)", step)


def _cpp_loop_nest(name: str, params: list[str], what: str, reverse: bool, first: str,
                   first_body: list[str], row: str, prev: str, steps: str, body: list[str]
                   ) -> str:
    sig = (",\n" + " " * (len(name) + 17)).join(params)

    def block(lines: list[str]) -> str:
        return "\n".join(f"                {line}" for line in lines)
    return f"""// {name}: {what}, sequential along n{' (reversed)' if reverse else ''}
extern "C" void {name}({sig})
{{
    for (int64_t x0 = 0; x0 < outer; x0++)
    {{
        {{
            const int64_t row = (x0 * n + {first}) * inner;
            #pragma omp simd
            for (int64_t x1 = 0; x1 < inner; x1++)
            {{
{block(first_body)}
            }}
        }}
        {steps}
        {{
            const int64_t row = (x0 * n + {row}) * inner;
            const int64_t prev = (x0 * n + {prev}) * inner;
            #pragma omp simd
            for (int64_t x1 = 0; x1 < inner; x1++)
            {{
{block(body)}
            }}
        }}
    }}
}}"""


def triton_scan_source(name: str, num_leaves: int, dtype: torch.dtype, reverse: bool,
                       lines: Sequence[str], results: Sequence[str]) -> str:
    """The forward kernel in Triton: the running value of each leaf in registers."""
    k = range(num_leaves)
    params = [f"in{i}" for i in k] + [f"out{i}" for i in k]
    first = [f"acc{i} = tl.load(in{i} + row, mask=xmask, other=0.0)" for i in k] + \
        [f"tl.store(out{i} + row, acc{i}, mask=xmask)" for i in k]
    step = [f"left{i} = acc{i}" for i in k] + \
        [f"right{i} = tl.load(in{i} + row, mask=xmask, other=0.0)" for i in k] + \
        list(lines) + [f"acc{i} = {r}" for i, r in zip(k, results)] + \
        [f"tl.store(out{i} + row, acc{i}, mask=xmask)" for i in k]
    return _triton_loop(name, params, f"an inclusive scan of {num_leaves} tensor(s)",
                        reverse, _position("0", reverse), first, "step",
                        [f"row = base + ({_position('step', reverse)}) * inner", *step], [])


def triton_scan_backward_source(name: str, num_leaves: int, dtype: torch.dtype,
                                reverse: bool, has_grad: Sequence[bool], lines: Sequence[str],
                                results: Sequence[str | None]) -> str:
    """The gradient kernel in Triton: the running gradient ``G`` of each leaf in
    registers, walking from the last position to the first."""
    k = range(num_leaves)
    params = [f"in{i}" for i in k] + [f"out{i}" for i in k] + \
        [f"grad_out{i}" for i in k if has_grad[i]] + [f"grad_in{i}" for i in k]
    zero = f"tl.zeros([XBLOCK], {TRITON_DTYPES[dtype]})"
    first = [f"g{i} = tl.load(grad_out{i} + row, mask=xmask, other=0.0)" if has_grad[i]
             else f"g{i} = {zero}" for i in k]
    d_left, d_right = results[:num_leaves], results[num_leaves:]
    step = [f"row = base + ({_position('n - s', reverse)}) * inner",
            f"prev = base + ({_position('n - s - 1', reverse)}) * inner"] + \
        [f"left{i} = tl.load(out{i} + prev, mask=xmask, other=0.0)" for i in k] + \
        [f"right{i} = tl.load(in{i} + row, mask=xmask, other=0.0)" for i in k] + \
        list(lines) + \
        [f"tl.store(grad_in{i} + row, {d or zero}, mask=xmask)" for i, d in zip(k, d_right)]
    for i, d in zip(k, d_left):   # G of the position before, from this one's
        terms = [f"tl.load(grad_out{i} + prev, mask=xmask, other=0.0)"] * has_grad[i] + \
            ([d] if d is not None else [])
        step.append(f"g{i}_prev = {' + '.join(terms) or zero}")
    step += [f"g{i} = g{i}_prev" for i in k]
    last = [f"row = base + ({_position('0', reverse)}) * inner"] + \
        [f"tl.store(grad_in{i} + row, g{i}, mask=xmask)" for i in k]
    return _triton_loop(name, params, f"the gradient of a scan of {num_leaves} tensor(s)",
                        reverse, _position("n - 1", reverse), first, "s", step, last)


def _triton_loop(name: str, params: list[str], what: str, reverse: bool, first: str,
                 first_body: list[str], var: str, body: list[str], after: list[str]) -> str:
    def block(lines: list[str], indent: int) -> str:
        return "\n".join(" " * indent + line for line in lines)
    return f"""# {name}: {what}, sequential along n{' (reversed)' if reverse else ''}
@triton.jit
def {name}({', '.join(params)}, outer, n, inner, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0).to(tl.int64) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < outer * inner
    base = (xindex // inner) * n * inner + xindex % inner
    row = base + ({first}) * inner
{block(first_body, 4)}
    for {var} in range(1, n):
{block(body, 8)}
{block(after, 4)}
"""


def _leaves_reason(xs_metas: Sequence[Any], language: str) -> str | None:
    dtypes = {m.dtype for m in xs_metas}
    if len(dtypes) != 1 or next(iter(dtypes)) not in SCAN_DTYPES:
        return f"the leaves' dtypes {sorted(map(str, dtypes))} are not one of float32, float64"
    if any(tuple(m.shape) != tuple(xs_metas[0].shape) for m in xs_metas):
        return "the leaves' shapes differ"
    if language == "cpp" and any(torch.device(m.device).type != "cpu" for m in xs_metas):
        return "the leaves are not on the CPU"
    return None


def compile_scan(name: str, language: str, combine_fn: Any, xs_metas: Sequence[Any],
                 packed: type | None, dim: int, reverse: bool) -> ScanKernel | str:
    """A :class:`ScanKernel` in ``language`` for leaves like ``xs_metas`` (their shapes and
    dtypes), or why there is none."""
    why = _leaves_reason(xs_metas, language)
    if why is not None:
        return why
    dtype, k = xs_metas[0].dtype, len(xs_metas)
    prims = combine_prims(combine_fn, k, dtype)
    if isinstance(prims, str):
        return prims
    spelled = spell_prims(prims, [f"left{i}" for i in range(k)] +
                          [f"right{i}" for i in range(k)], dtype, "combine_fn", language)
    if isinstance(spelled, str):
        return spelled
    lines, maybe_results = spelled
    results = [r for r in maybe_results if r is not None]
    if len(results) < len(maybe_results):
        return "combine_fn returns None"
    write = cpp_scan_source if language == "cpp" else triton_scan_source
    return ScanKernel(name, language, write(name, k, dtype, reverse, lines, results), packed,
                      k, dim)


def compile_scan_backward(scan: ScanKernel, combine_fn: Any, dtype: torch.dtype,
                          reverse: bool, leaf_inputs: Sequence[int], num_inputs: int,
                          needs_grad: Sequence[bool], has_grad: Sequence[bool]
                          ) -> ScanGradKernel | str:
    """The gradient kernel of ``scan`` (its leaves are ``inputs[leaf_inputs[i]]``; output
    ``i`` has a gradient where ``has_grad[i]``), or why there is none."""
    k = scan.num_leaves
    prims = combine_prims(combine_fn, k, dtype)
    if isinstance(prims, str):
        return prims
    try:
        grads = backward_graph(prims)
    except Exception as e:   # noqa: BLE001 -- a prim without a VJP rule: PyTorch's loop
        return f"combine_fn's gradient could not be built ({type(e).__name__}: {e})"
    names = [f"left{i}" for i in range(k)] + [f"right{i}" for i in range(k)] + \
        [f"g{i}" for i in range(k)]
    spelled = spell_prims(grads, names, dtype, "combine_fn's gradient", scan.language)
    if isinstance(spelled, str):
        return spelled
    lines, results = spelled
    write = cpp_scan_backward_source if scan.language == "cpp" else \
        triton_scan_backward_source
    source = write(f"{scan.__name__}_backward", k, dtype, reverse, has_grad, lines, results)
    return ScanGradKernel(scan, source, leaf_inputs, num_inputs, needs_grad, has_grad)


# what the wrapper calls like a PyTorch op, by the kernel's own name, listing its source
GENERATED_EXTERNS = (ScanKernel, ScanGradKernel)

__all__ = ["GENERATED_EXTERNS", "ScanGradKernel", "ScanKernel", "combine_prims",
           "compile_scan", "compile_scan_backward", "cpp_scan_backward_source",
           "cpp_scan_source", "spell_prims", "triton_scan_backward_source",
           "triton_scan_source"]
