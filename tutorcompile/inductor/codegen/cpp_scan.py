"""A scan kernel for the CPU: ``sequential_scan`` with a pointwise ``combine_fn``, in C++.

Once its length is a symbol, Mamba's selective scan reaches stage 5 as one
:func:`~tutorcompile.ops.scan.sequential_scan` node (see ``dynamo/variables/
higher_order_ops.py``). Run by PyTorch it is a Python loop of a few small ops per position;
when ``combine_fn`` is made of pointwise ops only, the whole scan is one loop nest instead,
with the length an argument like any symbolic size::

    for (int64_t x0 = 0; x0 < outer; x0++)              // the dims before the scan dim
        for (int64_t step = 1; step < n; step++) {      // in order: each step reads the last
            const int64_t row = (x0 * n + step) * inner, prev = row - inner;
            #pragma omp simd                            // the dims after it: independent
            for (int64_t x1 = 0; x1 < inner; x1++) {
                auto left0 = out0[prev + x1];  auto right0 = in0[row + x1];  ...
                out0[row + x1] = <combine_fn, spelled>;  ...
            }
        }

(step 0 copies the first position; ``reverse`` walks the rows the other way). The
``combine_fn`` is traced on one-element tensors and decomposed into prims, and every
prim is spelled by the same table the fused kernels use. Anything else -- a reduction or a
view in ``combine_fn``, leaves of different shapes or dtypes, a dtype other than float32 or
float64 -- keeps PyTorch's loop, and the lowering says why.

The backward graph asks for the scan's gradient through stage 4's ``extern_backward`` (which
would replay the loop under PyTorch's autograd). Its kernel, :class:`CppScanBackward`, runs
the scan again and then walks back over it with the *VJP rules* of ``combine_fn``'s prims
(stage 1's ``backward_graph``), spelled the same way: a reverse scan of gradients.

Mirrors: torch/_inductor/ir.py (``Scan``: a pointwise ``combine_fn`` over a scan range, which
Inductor's Triton backend lowers to ``tl.associative_scan``; its C++ backend has no
``BackendFeature.SCAN`` and falls back to the eager implementation) -- ours writes the
sequential loop in C++, and its gradient too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ...fx import Graph, Node
from ...ops import Prim
from ...ops.virtualized import spell
from .cpp import CPP_TYPES, CppKernelCall

SCAN_DTYPES = (torch.float32, torch.float64)
SIZE_ARGS = ["outer", "n", "inner"]


def _extents(shape: Sequence[int], dim: int) -> tuple[int, int, int]:
    """A contiguous tensor as ``outer x n x inner`` around its scan dimension."""
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


class CppScan:
    """A compiled scan: ``cpp_scan(xs)`` is ``sequential_scan(combine_fn, xs, dim,
    reverse)`` for tensors ``xs`` of the shapes it was compiled for (any length, and any
    size in the other dimensions: they are arguments too)."""

    def __init__(self, name: str, source: str, packed: type | None, num_leaves: int,
                 dim: int, dtype: torch.dtype):
        self.__name__ = name       # (the wrapper binds it under this name)
        self.source = source
        self.packed, self.num_leaves, self.dim, self.dtype = packed, num_leaves, dim, dtype
        k = range(num_leaves)
        self.kernel = CppKernelCall(name, source, [f"in{i}" for i in k] +
                                    [f"out{i}" for i in k], size_args=SIZE_ARGS)

    def scan(self, leaves: list[torch.Tensor]) -> list[torch.Tensor]:
        """The scan of contiguous ``leaves``, one result each."""
        outs = [torch.empty(leaves[0].shape, dtype=self.dtype) for _ in leaves]
        extents = _extents(leaves[0].shape, self.dim)
        if extents[1]:
            self.kernel(*leaves, *outs, *extents)
        return outs

    def __call__(self, xs: Any) -> Any:
        outs = self.scan([x.contiguous() for x in (xs if self.packed else [xs])])
        return self.packed(outs) if self.packed else outs[0]

    def __repr__(self) -> str:
        return f"<C++ scan kernel {self.__name__}>"


class CppScanBackward:
    """The gradient of a :class:`CppScan`, called as the backward graph calls PyTorch's
    (``extern_backward``): ``grad(grad_outputs, *inputs)`` gives one gradient per input.
    It recomputes the scan (the forward saved only its inputs), then walks it backwards::

        G[last] = g[last]
        G[i-1]  = g[i-1] + d combine / d left  at (out[i-1], x[i]), applied to G[i]
        dx[i]   =          d combine / d right at (out[i-1], x[i]), applied to G[i]
        dx[first] = G[first]

    -- the VJP rules of the combine's prims (stage 1), spelled like the forward."""

    def __init__(self, scan: CppScan, source: str, leaf_inputs: Sequence[int],
                 num_inputs: int, needs_grad: Sequence[bool], has_grad: Sequence[bool]):
        self.__name__ = f"{scan.__name__}_backward"
        self.scan, self.source = scan, source
        self.leaf_inputs, self.num_inputs = list(leaf_inputs), num_inputs
        self.needs_grad, self.has_grad = list(needs_grad), list(has_grad)
        k = range(scan.num_leaves)
        args = [f"in{i}" for i in k] + [f"out{i}" for i in k] + \
            [f"grad_out{i}" for i in k if has_grad[i]] + [f"grad_in{i}" for i in k]
        self.kernel = CppKernelCall(self.__name__, source, args, size_args=SIZE_ARGS)

    def __call__(self, grad_outputs: Sequence[Any], *inputs: torch.Tensor) -> tuple:
        leaves = [inputs[i].contiguous() for i in self.leaf_inputs]
        outs = self.scan.scan(leaves)
        grads = [g.contiguous() for g, has in zip(grad_outputs, self.has_grad) if has]
        grad_in = [torch.empty_like(x) for x in leaves]
        extents = _extents(leaves[0].shape, self.scan.dim)
        if extents[1]:
            self.kernel(*leaves, *outs, *grads, *grad_in, *extents)
        result: list[Any] = [None] * self.num_inputs
        for i, g in zip(self.leaf_inputs, grad_in):
            if self.needs_grad[i]:
                result[i] = g if result[i] is None else result[i] + g
        return tuple(result)

    def __repr__(self) -> str:
        return f"<C++ scan gradient kernel {self.__name__}>"


def combine_prims(combine_fn: Any, packed: type | None, num_leaves: int,
                  dtype: torch.dtype) -> Graph | str:
    """``combine_fn`` as a graph of prims over one-element tensors (inputs: the left
    leaves, then the right ones), or why it cannot be traced so."""
    from ...aot.prim_graph import decompose
    from ...aot.tracing import trace_with_inputs

    def flat(*values):
        pack = (lambda items: packed(items)) if packed else (lambda items: items[0])
        result = combine_fn(pack(values[:num_leaves]), pack(values[num_leaves:]))
        return tuple(result) if packed else (result,)
    examples = [torch.ones(1, dtype=dtype) for _ in range(2 * num_leaves)]
    try:
        traced, _ = trace_with_inputs(flat, examples)
        return decompose(traced.graph, examples)[0]
    except Exception as e:   # noqa: BLE001 -- any failure keeps PyTorch's loop
        return f"combine_fn could not be traced to prims ({type(e).__name__}: {e})"


def spell_prims(graph: Graph, names: Sequence[str], dtype: torch.dtype, what: str
                ) -> tuple[list[str], list[str | None]] | str:
    """A graph of pointwise prims as C++: statements computing temporaries from its inputs
    (called ``names``, in order), and the expression of each output (None for an output
    that is None), or why it cannot be written so."""
    env: dict[Node, str] = {}
    lines: list[str] = []

    def operand(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
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
            if not isinstance(target, Prim) or not target.is_pointwise or target.cpp is None:
                name = target.name if isinstance(target, Prim) else getattr(
                    target, "__name__", str(target))
                return f"{what} calls {name}, not a pointwise prim"
            meta = node.meta.get("tensor_meta")
            if meta is None or meta.dtype not in (dtype, torch.bool):
                return f"{what} computes in {getattr(meta, 'dtype', '?')}, not {dtype}"
            args = [env[a] if isinstance(a, Node) else a for a in node.args]
            kwargs = {k: env[v] if isinstance(v, Node) else v for k, v in node.kwargs.items()}
            try:
                text = spell(target.cpp, args, kwargs, operand, CPP_TYPES.__getitem__)
            except (TypeError, KeyError) as e:
                return f"{what}'s {target.name} has an argument C++ cannot spell ({e})"
            env[node] = f"tmp{len(lines)}"
            lines.append(f"auto {env[node]} = {text};")
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


def scan_source(name: str, num_leaves: int, dtype: torch.dtype, reverse: bool,
                lines: Sequence[str], results: Sequence[str]) -> str:
    """The forward kernel: leaves contiguous, viewed as ``outer x n x inner``."""
    t = CPP_TYPES[dtype]
    k = range(num_leaves)
    params = [f"const {t}* __restrict__ in{i}" for i in k] + \
        [f"{t}* __restrict__ out{i}" for i in k] + [f"int64_t {a}" for a in SIZE_ARGS]
    copies = [f"out{i}[row + x1] = in{i}[row + x1];" for i in k]
    step = [f"auto left{i} = out{i}[prev + x1];" for i in k] + \
        [f"auto right{i} = in{i}[row + x1];" for i in k] + list(lines) + \
        [f"out{i}[row + x1] = {r};" for i, r in zip(k, results)]
    return _loop_nest(name, params, f"an inclusive scan of {num_leaves} tensor(s)", reverse,
                      _position("0", reverse), copies, _position("step", reverse),
                      _position("step - 1", reverse), "for (int64_t step = 1; step < n; "
                      "step++)", step)


def scan_backward_source(name: str, num_leaves: int, dtype: torch.dtype, reverse: bool,
                         has_grad: Sequence[bool], lines: Sequence[str],
                         results: Sequence[str | None]) -> str:
    """The gradient kernel (see :class:`CppScanBackward`): ``grad_in`` holds the running
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
        [f"grad_in{i}[row + x1] = {d or zero};" for i, d in zip(k, d_right)] + \
        [f"grad_in{i}[prev + x1] = "
         f"{' + '.join([f'grad_out{i}[prev + x1]'] * has_grad[i] + [d] * (d is not None)) or zero};"
         for i, d in zip(k, d_left)]
    return _loop_nest(name, params, f"the gradient of a scan of {num_leaves} tensor(s)",
                      reverse, _position("n - 1", reverse), firsts,
                      _position("step", reverse), _position("step - 1", reverse),
                      "for (int64_t step = n - 1; step >= 1; step--)", step)


def _loop_nest(name: str, params: list[str], what: str, reverse: bool, first: str,
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


def _leaves_reason(xs_metas: Sequence[Any]) -> str | None:
    dtypes = {m.dtype for m in xs_metas}
    if len(dtypes) != 1 or next(iter(dtypes)) not in SCAN_DTYPES:
        return f"the leaves' dtypes {sorted(map(str, dtypes))} are not one of float32, float64"
    if any(tuple(m.shape) != tuple(xs_metas[0].shape) for m in xs_metas):
        return "the leaves' shapes differ"
    if any(torch.device(m.device).type != "cpu" for m in xs_metas):
        return "the leaves are not on the CPU"
    return None


def compile_scan(name: str, combine_fn: Any, xs_metas: Sequence[Any], packed: type | None,
                 dim: int, reverse: bool) -> CppScan | str:
    """A :class:`CppScan` for leaves like ``xs_metas`` (their shapes and dtypes), or why
    there is none."""
    why = _leaves_reason(xs_metas)
    if why is not None:
        return why
    dtype, k = xs_metas[0].dtype, len(xs_metas)
    prims = combine_prims(combine_fn, packed, k, dtype)
    if isinstance(prims, str):
        return prims
    spelled = spell_prims(prims, [f"left{i}" for i in range(k)] +
                          [f"right{i}" for i in range(k)], dtype, "combine_fn")
    if isinstance(spelled, str):
        return spelled
    lines, results = spelled
    if None in results:
        return "combine_fn returns None"
    source = scan_source(name, k, dtype, reverse, lines, results)
    return CppScan(name, source, packed, k, dim, dtype)


def compile_scan_backward(scan: CppScan, combine_fn: Any, reverse: bool,
                          leaf_inputs: Sequence[int], num_inputs: int,
                          needs_grad: Sequence[bool], has_grad: Sequence[bool]
                          ) -> CppScanBackward | str:
    """The gradient kernel of ``scan`` (its leaves are ``inputs[leaf_inputs[i]]``; output
    ``i`` has a gradient where ``has_grad[i]``), or why there is none."""
    from ...ops.autodiff import backward_graph
    k = scan.num_leaves
    prims = combine_prims(combine_fn, scan.packed, k, scan.dtype)
    if isinstance(prims, str):
        return prims
    try:
        grads = backward_graph(prims)
    except Exception as e:   # noqa: BLE001 -- a prim without a VJP rule: PyTorch's loop
        return f"combine_fn's gradient could not be built ({type(e).__name__}: {e})"
    names = [f"left{i}" for i in range(k)] + [f"right{i}" for i in range(k)] + \
        [f"g{i}" for i in range(k)]
    spelled = spell_prims(grads, names, scan.dtype, "combine_fn's gradient")
    if isinstance(spelled, str):
        return spelled
    lines, results = spelled
    source = scan_backward_source(f"{scan.__name__}_backward", k, scan.dtype, reverse,
                                  has_grad, lines, results)
    return CppScanBackward(scan, source, leaf_inputs, num_inputs, needs_grad, has_grad)


# what the wrapper calls like a PyTorch op, by the kernel's own name, listing its source
GENERATED_EXTERNS = (CppScan, CppScanBackward)

__all__ = ["GENERATED_EXTERNS", "CppScan", "CppScanBackward", "combine_prims", "compile_scan",
           "compile_scan_backward", "scan_backward_source", "scan_source", "spell_prims"]
