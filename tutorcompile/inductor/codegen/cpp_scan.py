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
``combine_fn`` is traced once on one-element tensors and decomposed into prims, and every
prim is spelled by the same table the fused kernels use. Anything else -- a reduction or a
view in ``combine_fn``, leaves of different shapes or dtypes, a dtype other than float32 or
float64 -- keeps PyTorch's loop, and the lowering says why.

The gradient is not generated: the backward graph's extern node replays ``sequential_scan``
under PyTorch's autograd (stage 4's ``extern_backward``).

Mirrors: torch/_inductor/ir.py (``Scan``: a pointwise ``combine_fn`` over a scan range,
which Inductor's Triton backend lowers to ``tl.associative_scan``; for the CPU PyTorch falls
back to the eager implementation) -- ours writes the sequential loop in C++.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ...fx import Node
from ...ops import Prim
from ...ops.virtualized import spell
from .cpp import CPP_TYPES, CppKernelCall

SCAN_DTYPES = (torch.float32, torch.float64)


class CppScan:
    """A compiled scan: ``cpp_scan(xs)`` is ``sequential_scan(combine_fn, xs, dim,
    reverse)`` for tensors ``xs`` of the shapes it was compiled for (any length, and any
    size in the other dimensions: they are arguments too)."""

    def __init__(self, name: str, source: str, packed: type | None, num_leaves: int,
                 dim: int, dtype: torch.dtype):
        self.__name__ = name       # (the wrapper binds it under this name)
        self.source = source
        self.packed, self.num_leaves, self.dim, self.dtype = packed, num_leaves, dim, dtype
        args = [f"in{k}" for k in range(num_leaves)] + [f"out{k}" for k in range(num_leaves)]
        self.kernel = CppKernelCall(name, source, args, size_args=["outer", "n", "inner"])

    def __call__(self, xs: Any) -> Any:
        leaves = [x.contiguous() for x in (xs if self.packed else [xs])]
        shape = leaves[0].shape
        outs = [torch.empty(shape, dtype=self.dtype) for _ in leaves]
        n = shape[self.dim]
        if n:
            self.kernel(*leaves, *outs, math.prod(shape[:self.dim]), n,
                        math.prod(shape[self.dim + 1:]))
        return self.packed(outs) if self.packed else outs[0]

    def __repr__(self) -> str:
        return f"<C++ scan kernel {self.__name__}>"


def combine_expressions(combine_fn: Any, packed: type | None, num_leaves: int,
                        dtype: torch.dtype) -> tuple[list[str], list[str]] | str:
    """``combine_fn`` as C++: (statements computing temporaries from ``left0``...,
    ``right0``..., the expressions of its results), or why it cannot be written so."""
    from ...aot.prim_graph import decompose
    from ...aot.tracing import trace_with_inputs

    def flat(*values):
        pack = (lambda items: packed(items)) if packed else (lambda items: items[0])
        result = combine_fn(pack(values[:num_leaves]), pack(values[num_leaves:]))
        return tuple(result) if packed else (result,)
    examples = [torch.ones(1, dtype=dtype) for _ in range(2 * num_leaves)]
    try:
        traced, _ = trace_with_inputs(flat, examples)
        prims, _ = decompose(traced.graph, examples)
    except Exception as e:   # noqa: BLE001 -- any failure keeps PyTorch's loop
        return f"combine_fn could not be traced to prims ({type(e).__name__}: {e})"
    names = [f"left{k}" for k in range(num_leaves)] + [f"right{k}" for k in range(num_leaves)]
    env: dict[Any, str] = {}
    lines: list[str] = []

    def operand(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            if not math.isfinite(value):
                what = "infinity()" if math.isinf(value) else "quiet_NaN()"
                return f"{'-' if value < 0 else ''}std::numeric_limits<{CPP_TYPES[dtype]}>::{what}"
            return f"static_cast<{CPP_TYPES[dtype]}>({value!r})"
        if isinstance(value, int):
            return str(value)
        raise TypeError(type(value).__name__)
    for node in prims.nodes:
        if node.op == "placeholder":
            env[node] = names[len(env)]
        elif node.op == "call_function":
            target = node.target
            if not isinstance(target, Prim) or not target.is_pointwise or target.cpp is None:
                what = target.name if isinstance(target, Prim) else getattr(
                    target, "__name__", str(target))
                return f"combine_fn calls {what}, not a pointwise prim"
            meta = node.meta.get("tensor_meta")
            if meta is None or meta.dtype not in (dtype, torch.bool):
                return f"combine_fn computes in {getattr(meta, 'dtype', '?')}, not {dtype}"
            args = [env[a] if isinstance(a, Node) else a for a in node.args]
            kwargs = {k: env[v] if isinstance(v, Node) else v for k, v in node.kwargs.items()}
            try:
                text = spell(target.cpp, args, kwargs, operand, CPP_TYPES.__getitem__)
            except (TypeError, KeyError) as e:
                return f"combine_fn's {target.name} has an argument C++ cannot spell ({e})"
            env[node] = f"tmp{len(lines)}"
            lines.append(f"auto {env[node]} = {text};")
        elif node.op == "output":
            results = node.args[0] if isinstance(node.args[0], (tuple, list)) else \
                [node.args[0]]
            if len(results) != num_leaves or not all(r in env for r in results):
                return "combine_fn does not return one tensor per leaf"
            for r in results:
                meta = r.meta.get("tensor_meta")
                if meta is not None and meta.dtype != dtype:
                    return f"combine_fn returns {meta.dtype}, not {dtype}"
            return lines, [env[r] for r in results]
        else:
            return f"combine_fn has a {node.op} node"
    return "combine_fn returns nothing"


def scan_source(name: str, num_leaves: int, dtype: torch.dtype, reverse: bool,
                lines: Sequence[str], results: Sequence[str]) -> str:
    """The kernel: leaves contiguous, viewed as ``outer x n x inner``."""
    t = CPP_TYPES[dtype]
    k = range(num_leaves)
    params = [f"const {t}* __restrict__ in{i}" for i in k] + \
        [f"{t}* __restrict__ out{i}" for i in k] + \
        ["int64_t outer", "int64_t n", "int64_t inner"]
    first, row = ("n - 1", "n - 1 - step") if reverse else ("0", "step")
    prev = "row + inner" if reverse else "row - inner"
    body = "\n".join(f"                {line}" for line in lines)
    loads = "\n".join(f"                auto left{i} = out{i}[prev + x1];\n"
                      f"                auto right{i} = in{i}[row + x1];" for i in k)
    stores = "\n".join(f"                out{i}[row + x1] = {r};" for i, r in zip(k, results))
    copies = "\n".join(f"            out{i}[row + x1] = in{i}[row + x1];" for i in k)
    sig = (",\n" + " " * (len(name) + 17)).join(params)
    return f"""// {name}: an inclusive scan{' (reversed)' if reverse else ''} of {num_leaves} \
tensor(s), sequential along n
extern "C" void {name}({sig})
{{
    for (int64_t x0 = 0; x0 < outer; x0++)
    {{
        {{
            const int64_t row = (x0 * n + {first}) * inner;
            #pragma omp simd
            for (int64_t x1 = 0; x1 < inner; x1++)
            {{
{copies}
            }}
        }}
        for (int64_t step = 1; step < n; step++)
        {{
            const int64_t row = (x0 * n + {row}) * inner;
            const int64_t prev = {prev};
            #pragma omp simd
            for (int64_t x1 = 0; x1 < inner; x1++)
            {{
{loads}
{body}
{stores}
            }}
        }}
    }}
}}"""


def compile_scan(name: str, combine_fn: Any, xs_metas: Sequence[Any], packed: type | None,
                 dim: int, reverse: bool) -> CppScan | str:
    """A :class:`CppScan` for leaves like ``xs_metas`` (their shapes and dtypes), or why
    there is none."""
    dtypes = {m.dtype for m in xs_metas}
    if len(dtypes) != 1 or next(iter(dtypes)) not in SCAN_DTYPES:
        return f"the leaves' dtypes {sorted(map(str, dtypes))} are not one of float32, float64"
    if any(tuple(m.shape) != tuple(xs_metas[0].shape) for m in xs_metas):
        return "the leaves' shapes differ"
    if any(torch.device(m.device).type != "cpu" for m in xs_metas):
        return "the leaves are not on the CPU"
    dtype = next(iter(dtypes))
    spelled = combine_expressions(combine_fn, packed, len(xs_metas), dtype)
    if isinstance(spelled, str):
        return spelled
    lines, results = spelled
    source = scan_source(name, len(xs_metas), dtype, reverse, lines, results)
    return CppScan(name, source, packed, len(xs_metas), dim, dtype)


__all__ = ["CppScan", "compile_scan", "combine_expressions", "scan_source"]
