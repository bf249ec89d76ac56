"""Triton kernels: blocks of elements with masks, for CUDA GPUs (and the CPU interpreter).

A pointwise kernel handles ``XBLOCK`` consecutive elements per program::

    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel                       # the last block sticks out: mask it
    tmp0 = tl.load(in_ptr_x + (xindex), xmask, other=0)
    ...
    tl.store(out_ptr_buf1 + (xindex), tmp2, xmask)

A reduction kernel works on an ``[XBLOCK, RBLOCK]`` tile: ``XBLOCK`` rows, ``RBLOCK``
columns of each. When a whole row fits in one block the kernel is *persistent*: the row is
loaded once and every phase (max, sum, the normalising epilogue) reuses it -- the fused
softmax of the Triton tutorial. Otherwise it is *looped*: each phase walks the row in
``RBLOCK`` steps with an accumulator (``tl.where(mask, acc + v, acc)``) -- and statistics
that can share a walk do (``one_pass.py``: online softmax, Welford), so a looped softmax or
layer norm reads its row twice: statistics, then output.

Masks follow the index: a load whose address uses ``rindex`` is masked with
``xmask & rmask``; one that only uses ``xindex`` with ``xmask``; a scalar address needs none.

Under ``TRITON_INTERPRET=1`` (no GPU) the same source runs on CPU tensors; each program
instance costs milliseconds there, so the launcher picks large blocks and few programs.
Each launch also says how many warps run a program (:func:`choose_num_warps`, from the
block) and how deep to pipeline its loops (``num_stages``), as Inductor's configs do.

Symbolic sizes (one compilation for every batch size): ``xnumel``/``rnumel`` are already
arguments; the size symbols an index uses (``s0``) are arguments after them, the grid is
computed by the wrapper from the sizes at each call, block sizes are chosen from the
example's sizes (the masks make any size right), and a reduction over a symbolic length is
looped (a persistent one needs ``RBLOCK`` >= every length).

Mirrors: torch/_inductor/codegen/triton.py (``TritonKernel``, ``TritonOverrides``) and
torch/_inductor/runtime/triton_heuristics.py (block sizes, persistent reductions).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

import torch

from ...fx.symbolic_shapes import hint_int, pycode
from ...ops import set_handler
from .. import config, ir
from ..codecache import triton_module
from .common import (
    HALF_DTYPES,
    CSEVar,
    KernelPlan,
    KernelWriter,
    canonical_source,
    compute_dtype,
    origin_names,
    origin_sources,
    print_index,
)
from .one_pass import OnePassPlan, find_one_pass, replay

TRITON_TYPES = {torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
                torch.float32: "tl.float32", torch.float64: "tl.float64",
                torch.int8: "tl.int8", torch.int16: "tl.int16", torch.int32: "tl.int32",
                torch.int64: "tl.int64", torch.uint8: "tl.uint8", torch.bool: "tl.int1"}


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def next_power_of_2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


class TritonKernel(KernelWriter):
    """Writes one ``@triton.jit`` kernel for a :class:`KernelPlan`."""
    language = "triton"

    def __init__(self, plan: KernelPlan, name: str, persistent: bool | None = None):
        super().__init__(plan, name)
        if persistent is None:
            persistent = isinstance(plan.rnumel, int) and \
                next_power_of_2(plan.rnumel) <= (config.triton_persistent_rblock_interpreted
                                                 if interpreted() else
                                                 config.triton_persistent_rblock)
        self.persistent = persistent if plan.is_reduction else False
        self.one_pass = OnePassPlan()   # looped reductions: found in generate_body

    def dtype_name(self, dtype: torch.dtype) -> str:
        return TRITON_TYPES[dtype]

    def literal(self, value: Any, dtype: torch.dtype) -> str:
        if isinstance(value, bool):
            return "True" if value else "False"
        if isinstance(value, float) or (dtype.is_floating_point and not isinstance(value, bool)):
            value = float(value)
            if math.isinf(value):
                return "float('-inf')" if value < 0 else "float('inf')"
            if math.isnan(value):
                return "float('nan')"
            return repr(value)
        return str(int(value))

    def wrap_constant(self, value: Any, dtype: torch.dtype) -> CSEVar:
        return self.cse(f"tl.full([], {self.literal(value, dtype)}, {TRITON_TYPES[dtype]})",
                        dtype)

    def mask_for(self, offset_expr) -> str | None:
        return self.mask_of(self.index_deps(offset_expr))

    @staticmethod
    def mask_of(deps) -> str | None:
        if "rindex" in deps:
            return "xmask & rmask"
        if "xindex" in deps:
            return "xmask"
        return None

    def check_index(self, value: CSEVar, size: str, check: int, what: str) -> CSEVar:
        # A device-side assert (live: kernels that check are built with debug=True), and
        # an address that stays inside the buffer whatever the data.
        inside = f"(0 <= {value}) & ({value} < {size})"
        mask = self.mask_of(value.deps)
        cond = f"({inside}) | ~({mask})" if mask else inside
        self.writeline(f'tl.device_assert({cond}, "{what}")')
        return self.cse(f"tl.where({inside}, {value}, 0)", torch.int64, value.deps)

    def load(self, buffer, index):
        # like KernelWriter.load, but the mask depends on which indices the address uses
        if buffer.name in self.plan.names:
            return super().load(buffer, index)
        self.inputs.setdefault(buffer.name, buffer)
        expr = buffer.layout.offset_of(index)
        mask = self.mask_for(expr)
        addr = f"{self.arg_name(buffer.name)} + {print_index(expr, 'triton')}"
        text = f"tl.load({addr}, {mask}, other=0)" if mask else f"tl.load({addr})"
        return self.loaded(text, buffer.get_dtype(), self.index_deps(expr))

    def index_cast(self, index: str, dtype: torch.dtype) -> str:
        return f"({index}).to({TRITON_TYPES[dtype]})"

    def widen(self, text: str, dtype: torch.dtype) -> str:
        return f"{text}.to(tl.float32)"

    def narrow(self, value: CSEVar, dtype: torch.dtype) -> str:
        # rounds to nearest even on a GPU; Triton's CPU interpreter truncates to bfloat16
        # (one unit in the last place at most: the tests' bfloat16 tolerance covers it)
        return f"{value}.to({TRITON_TYPES[dtype]})"

    def assign(self, var: CSEVar, expr: str) -> str:
        return f"{var} = {expr}"

    def store(self, node: ir.ComputedBuffer, index, value: CSEVar) -> None:
        self.outputs.setdefault(node.name, node)
        expr = node.layout.offset_of(index)
        # The address must be a block of the phase's shape even when the offset does not
        # use every index (a 0-d output, a size-1 dimension): add 0 * index to widen it.
        used = {s.name for s in getattr(expr, "free_symbols", ())}
        full = self.plan.is_reduction and self.plan.phases[node.name] == "full"
        need = ["xindex", "rindex"] if full else ["xindex"]
        widen = "".join(f" + 0 * {n}" for n in need if n not in used)
        mask = "xmask & rmask" if full else "xmask"
        addr = f"{self.out_name(node.name)} + {print_index(expr, 'triton')}{widen}"
        text = str(value)
        if node.get_dtype() in HALF_DTYPES:   # computed in float32: rounded as it is stored
            text = self.narrow(value, node.get_dtype())
        self.writeline(f"tl.store({addr}, {text}, {mask})")

    # -- structure -----------------------------------------------------------------------
    def generate_body(self) -> None:
        plan = self.plan
        with set_handler(self):
            if not plan.is_reduction:
                self.writeline("xoffset = tl.program_id(0) * XBLOCK")
                self.writeline("xindex = xoffset + tl.arange(0, XBLOCK)")
                self.writeline("xmask = xindex < xnumel")
                xvars = ir.unflatten_index(ir.index_symbol("xindex"), plan.shape)
                for node in plan.nodes:
                    if node.name in plan.stored:
                        self.store_at(node, xvars, [])
                return
            self.writeline("xoffset = tl.program_id(0) * XBLOCK")
            self.writeline("xindex = xoffset + tl.arange(0, XBLOCK)[:, None]")
            self.writeline("xmask = xindex < xnumel")
            self.writeline("rbase = tl.arange(0, RBLOCK)[None, :]")
            if self.persistent:
                self.writeline("rindex = rbase")
                self.writeline("rmask = rindex < rnumel")
            xvars = ir.unflatten_index(ir.index_symbol("xindex"), plan.kept_shape)
            rvars = ir.unflatten_index(ir.index_symbol("rindex"), plan.reduced_shape)
            if not self.persistent:   # statistics that can share a pass over the row
                self.one_pass = find_one_pass(plan, plan.full_index(xvars, rvars))

            def emit_full(nodes: list[ir.ComputedBuffer]) -> None:
                self.open_r_loop()
                for node in nodes:
                    self.store_at(node, xvars, rvars)
                self.close_r_loop()

            def emit_reduction(node: ir.ComputedBuffer, stores: list[ir.ComputedBuffer]
                               ) -> None:
                if stores and (self.one_pass.same.get(node.name) is not None or
                               node.name in self.one_pass.pairs or
                               node.name in self.reduction_values):
                    emit_full(stores)   # (statistics of one pass: stores in a pass before)
                    stores = []
                self.emit_reduction(node, xvars, rvars, stores)

            plan.walk_phases(emit_full, lambda node: self.store_at(node, xvars, rvars),
                             emit_reduction)

    def open_r_loop(self) -> None:
        if self.persistent:
            return
        self.writeline("for roffset in range(0, rnumel, RBLOCK):")
        self.indent += 1
        self.push_scope()
        self.writeline("rindex = roffset + rbase")
        self.writeline("rmask = rindex < rnumel")

    def close_r_loop(self) -> None:
        if self.persistent:
            return
        self.pop_scope()
        self.indent -= 1

    def emit_reduction(self, node: ir.ComputedBuffer, xvars, rvars,
                       stores: list[ir.ComputedBuffer] | tuple = ()) -> None:
        """The reduction ``node`` for the block's rows, storing ``stores`` (``full``-phase
        values that do not read it) in the same pass over the row."""
        if node.name in self.reduction_values:   # computed in its pair's pass (and stored)
            return
        if (earlier := self.one_pass.same.get(node.name)) is not None:
            self.finish_reduction(node, self.reduction_values[earlier][0], xvars, rvars)
            return
        if (pair := self.one_pass.pairs.get(node.name)) is not None:
            kind, second_name = pair
            second = next(n for n in self.plan.nodes if n.name == second_name)
            emit = self.emit_online_softmax if kind == "online_softmax" else self.emit_welford
            emit(node, second, xvars, rvars)
            return
        data = node.reduction
        dtype = compute_dtype(data.dtype)   # a 16-bit float reduces in float32
        t = TRITON_TYPES[dtype]
        init = self.literal(ir.reduction_init(data.reduction_type, dtype), dtype)
        combine = "tl.sum" if data.reduction_type == "sum" else "tl.max"
        index = self.plan.full_index(xvars, rvars)
        # tl.max drops NaNs, torch.amax keeps them: count them beside the max.
        track_nan = data.reduction_type == "max" and dtype.is_floating_point
        if self.persistent:
            for other in stores:
                self.store_at(other, xvars, rvars)
            value = data.inner_fn(index)
            masked = self.cse(f"tl.where(xmask & rmask, {value}, {init})", dtype)
            result = self.cse(f"{combine}({masked}, 1)[:, None]", dtype)
            if track_nan:
                nans = self.cse(f"tl.sum(tl.where(xmask & rmask & ({value} != {value}), 1, 0)"
                                ", 1)[:, None]", torch.int32)
                result = self.cse(f"tl.where({nans} > 0, float('nan'), {result})", dtype)
        else:
            acc = self.newvar(dtype, "acc")
            self.writeline(f"{acc} = tl.full([XBLOCK, RBLOCK], {init}, {t})")
            if track_nan:
                nan_acc = self.newvar(torch.int32, "nan")
                self.writeline(f"{nan_acc} = tl.zeros([XBLOCK, RBLOCK], tl.int32)")
            self.open_r_loop()
            for other in stores:
                self.store_at(other, xvars, rvars)
            value = data.inner_fn(index)
            step = f"{acc} + {value}" if data.reduction_type == "sum" else \
                f"tl.maximum({acc}, {value})"
            self.writeline(f"{acc} = tl.where(xmask & rmask, {step}, {acc})")
            if track_nan:
                self.writeline(f"{nan_acc} = tl.where(xmask & rmask & ({value} != {value}), "
                               f"1, {nan_acc})")
            self.close_r_loop()
            result = self.cse(f"{combine}({acc}, 1)[:, None]", dtype)
            if track_nan:
                result = self.cse(f"tl.where(tl.max({nan_acc}, 1)[:, None] > 0, float('nan'), "
                                  f"{result})", dtype)
        self.finish_reduction(node, result, xvars, rvars)

    def finish_reduction(self, node: ir.ComputedBuffer, result: CSEVar, xvars, rvars) -> None:
        """``result`` is ``node``'s value for the rows of the block: later phases read it,
        and it is stored if anything outside the kernel does."""
        out_index = self.plan.node_index(node, xvars, rvars)
        self.reduction_values[node.name] = (result, out_index)
        if node.name in self.plan.stored:
            self.store(node, out_index, result)

    def emit_online_softmax(self, max_node: ir.ComputedBuffer, sum_node: ir.ComputedBuffer,
                            xvars, rvars) -> None:
        """``max(x)`` and ``sum(exp(x - max(x)))`` in one pass over the row (see
        ``one_pass``): each lane keeps a running max and the sum of its terms shifted by
        that max, rescaled by ``exp(old - new)`` when the max grows. While every value a
        lane has seen is -inf its max is -inf: it counts terms as 1 (``exp(0)``), and a
        finite max later scales them by ``exp(-inf) = 0``."""
        dtype = compute_dtype(max_node.data.dtype)
        t = TRITON_TYPES[dtype]
        index = self.plan.full_index(xvars, rvars)
        m_acc, s_acc = self.newvar(dtype, "max"), self.newvar(dtype, "sum")
        nan_acc = self.newvar(torch.int32, "nan")
        self.writeline(f"{m_acc} = tl.full([XBLOCK, RBLOCK], float('-inf'), {t})")
        self.writeline(f"{s_acc} = tl.zeros([XBLOCK, RBLOCK], {t})")
        self.writeline(f"{nan_acc} = tl.zeros([XBLOCK, RBLOCK], tl.int32)")
        self.open_r_loop()
        value = max_node.data.inner_fn(index)
        m_new = self.cse(f"tl.where(xmask & rmask, tl.maximum({m_acc}, {value}), {m_acc})",
                         dtype)
        # the sum's own expression, exp(x - max), evaluated with the running max
        self.reduction_values[max_node.name] = (m_new, self.plan.node_index(max_node, xvars,
                                                                            rvars))
        term = sum_node.data.inner_fn(index)
        empty = self.cse(f"{m_new} == float('-inf')", torch.bool)
        scale = self.cse(f"tl.where({empty}, 1.0, tl.exp({m_acc} - {m_new}))", dtype)
        self.writeline(f"{s_acc} = tl.where(xmask & rmask, {s_acc} * {scale} + "
                       f"tl.where({empty}, 1.0, {term}), {s_acc})")
        self.writeline(f"{nan_acc} = tl.where(xmask & rmask & ({value} != {value}), 1, "
                       f"{nan_acc})")
        self.writeline(f"{m_acc} = {m_new}")
        self.close_r_loop()
        row_max = self.cse(f"tl.max({m_acc}, 1)[:, None]", dtype)
        row_max = self.cse(f"tl.where(tl.max({nan_acc}, 1)[:, None] > 0, float('nan'), "
                           f"{row_max})", dtype)   # torch.amax keeps NaNs
        row_sum = self.cse(f"tl.sum({s_acc} * tl.exp({m_acc} - {row_max}), 1)[:, None]", dtype)
        self.finish_reduction(max_node, row_max, xvars, rvars)
        self.finish_reduction(sum_node, row_sum, xvars, rvars)

    def emit_welford(self, sum_node: ir.ComputedBuffer, squares_node: ir.ComputedBuffer,
                     xvars, rvars) -> None:
        """``sum(x)`` and ``sum((x - c)**2)`` (``c`` computed from the sum) in one pass
        over the row (see ``one_pass``). Each lane keeps the plain sum and Welford's count,
        running mean and M2 of ``x - k``, ``k`` the row's first value: shifted, the lanes'
        means are small numbers held to float32's *relative* precision. (Unshifted, a lane's
        mean of ``1e4 + noise`` is off by float32's spacing at 1e4, ~5e-4, and merging the
        lanes turns that into an error of the variance ~800x the two-pass one.) The lanes
        merge around the row's mean ``mu``, and ``sum((x - c)**2) = M2 + n * (mu - c)**2``."""
        dtype = compute_dtype(sum_node.data.dtype)
        t = TRITON_TYPES[dtype]
        index = self.plan.full_index(xvars, rvars)
        # (every row has a first value: a looped row is longer than a block, or symbolic,
        # and symbolic sizes are never 0)
        shift = sum_node.data.inner_fn(self.plan.full_index(xvars, [0] * len(rvars)))
        total, count = self.newvar(dtype, "sum"), self.newvar(dtype, "count")
        mean, m2 = self.newvar(dtype, "mean"), self.newvar(dtype, "m2")
        for acc in (total, count, mean, m2):
            self.writeline(f"{acc} = tl.zeros([XBLOCK, RBLOCK], {t})")
        self.open_r_loop()
        value = sum_node.data.inner_fn(index)
        self.writeline(f"{total} = tl.where(xmask & rmask, {total} + {value}, {total})")
        shifted = self.cse(f"{value} - {shift}", dtype)
        count_new = self.cse(f"{count} + 1", dtype)
        delta = self.cse(f"{shifted} - {mean}", dtype)
        mean_new = self.cse(f"{mean} + {delta} / {count_new}", dtype)
        self.writeline(f"{m2} = tl.where(xmask & rmask, {m2} + {delta} * ({shifted} - "
                       f"{mean_new}), {m2})")
        self.writeline(f"{mean} = tl.where(xmask & rmask, {mean_new}, {mean})")
        self.writeline(f"{count} = tl.where(xmask & rmask, {count_new}, {count})")
        self.close_r_loop()
        row_sum = self.cse(f"tl.sum({total}, 1)[:, None]", dtype)
        n = self.cse(f"tl.sum({count}, 1)[:, None]", dtype)
        mu = self.cse(f"tl.sum({count} * {mean}, 1)[:, None] / {n}", dtype)   # of x - k
        row_m2 = self.cse(f"tl.sum({m2} + {count} * ({mean} - {mu}) * ({mean} - {mu}), 1)"
                          "[:, None]", dtype)
        self.finish_reduction(sum_node, row_sum, xvars, rvars)
        centre = replay(self.one_pass.centre[squares_node.name], {sum_node.name: row_sum})
        off = self.cse(f"({shift} - {centre}) + {mu}", dtype)   # mu - c, small terms first
        squares = self.cse(f"{row_m2} + {n} * {off} * {off}", dtype)
        self.finish_reduction(squares_node, squares, xvars, rvars)

    def generate(self) -> str:
        self.generate_body()
        params = [arg for arg, _, _ in self.signature_buffers()] + ["xnumel"]
        if self.plan.is_reduction:
            params += ["rnumel", *self.size_args(), "XBLOCK: tl.constexpr",
                       "RBLOCK: tl.constexpr"]
        else:
            params += [*self.size_args(), "XBLOCK: tl.constexpr"]
        kind = ("persistent reduction" if self.persistent else "looped reduction") \
            if self.plan.is_reduction else "pointwise"
        # device asserts (bounds checks of indirect indices) only run in debug builds
        jit = "@triton.jit(debug=True)" if self.index_checks else "@triton.jit"
        header = [jit, f"def {self.name}({', '.join(params)}):",
                  f"    # {kind}; graph nodes: {', '.join(origin_names(self.plan.nodes))}",
                  *(f"    #   {line}" for line in origin_sources(self.plan.nodes))]
        return "\n".join(header + ["    " + line for line in self.lines])


TRITON_PRELUDE = "import triton\nimport triton.language as tl\n\n\n"


def choose_blocks(plan: KernelPlan, persistent: bool) -> tuple[int, int]:
    """(XBLOCK, RBLOCK) for a plan: large blocks under the interpreter (few programs)."""
    interp = interpreted()
    xnumel = hint_int(plan.xnumel)   # (a symbolic size: its example's value)
    if not plan.is_reduction:
        cap = config.triton_xblock_interpreted if interp else config.triton_xblock
        return min(next_power_of_2(xnumel), cap), 1
    if persistent:
        rblock = next_power_of_2(plan.rnumel)
    else:
        rblock = config.triton_looped_rblock_interpreted if interp else \
            config.triton_looped_rblock
    tile = config.triton_tile_interpreted if interp else config.triton_tile
    xblock = max(1, min(next_power_of_2(xnumel), tile // rblock))
    return xblock, rblock


def choose_num_warps(kind: str, xblock: int, rblock: int = 1, rnumel: int = 1) -> int:
    """How many warps (groups of 32 GPU threads) run one program of a ``kind`` kernel
    (``"pointwise"``, ``"persistent"`` or ``"looped"``) with the given block.

    A program's block is spread over its threads: too few warps and each thread holds (and
    loads one after another) a long run of the block; too many and threads sit idle or
    registers run out. Inductor's rule of thumb, followed here: a pointwise block gives each
    warp about 256 elements (1 to 8 warps, at least 4 from 128 elements); a reduction block
    (``XBLOCK * RBLOCK``) about 128 (2 to 16 warps, 32 for rows over 8192), and a persistent
    reduction, which keeps its whole row in registers, half as many at most. The count is a
    power of two. It changes speed, never values: under the interpreter it has no effect.

    Mirrors: torch/_inductor/runtime/triton_heuristics.py (``_num_warps``, ``triton_config``,
    ``triton_config_reduction``, ``register_intensive`` persistent reductions).
    """
    def clamp(warps: int, low: int, high: int) -> int:
        return next_power_of_2(min(max(warps, low), high))
    if kind == "pointwise":
        warps = clamp(xblock // 256, 1, 8)
        return max(warps, 4) if xblock >= 128 else warps
    most = 16 if rnumel <= 8192 else 32
    if kind == "persistent":
        most //= 2
    return clamp(xblock * rblock // 128, 2, most)


class TritonKernelCall:
    """A Triton kernel ready to launch: ``call(*tensors)`` with inputs then outputs.

    Loaded from ``build_source`` (the canonical text, function ``kernel``) when given."""

    def __init__(self, name: str, source: str, arg_names: list[str], plan: KernelPlan,
                 persistent: bool, blocks: tuple[int, int] | None = None,
                 build_source: str | None = None, size_args: Sequence[str] = (),
                 num_warps: int | None = None):
        self.name = name
        self.source = source
        self.arg_names = arg_names
        self.size_args = list(size_args)
        # symbolic sizes: the grid is computed at each call (see call_source)
        self.symbolic = bool(self.size_args) or not isinstance(plan.xnumel, int) or \
            not isinstance(plan.rnumel, int)
        self.xnumel, self.rnumel = plan.xnumel, plan.rnumel
        self.is_reduction = plan.is_reduction
        self.xblock, self.rblock = blocks or choose_blocks(plan, persistent)
        kind = ("persistent" if persistent else "looped") if plan.is_reduction else "pointwise"
        self.num_warps = num_warps or choose_num_warps(kind, self.xblock, self.rblock,
                                                       hint_int(plan.rnumel))
        self.num_stages = config.triton_num_stages
        if build_source is None:
            self.fn = getattr(triton_module(TRITON_PRELUDE + source + "\n", name), name)
        else:   # the canonical text: a kernel repeated in the graph is loaded once
            self.fn = triton_module(TRITON_PRELUDE + build_source + "\n", "kernel").kernel

    @property
    def grid(self) -> tuple[int]:
        return (max(1, math.ceil(self.xnumel / self.xblock)),)

    # How the wrapper calls it: the launcher for the fixed grid, bound once as a global,
    # with the sizes and block sizes (constexprs) written into the call as literals.
    launcher_doc = "Triton kernel: kernel[grid], the grid fixed at compile time"

    @property
    def launcher(self):
        if self.symbolic:   # called as launcher(grid, *args): the grid is the call's
            if self.checks_indices and interpreted():
                return lambda grid, *args, **kwargs: self._launch_checked(self.fn[grid], args,
                                                                          kwargs)
            return lambda grid, *args, **kwargs: self.fn[grid](*args, **kwargs)
        if self.checks_indices and interpreted():
            return lambda *args, **kwargs: self._launch_checked(self.fn[self.grid], args,
                                                                kwargs)
        return self.fn[self.grid]

    @property
    def checks_indices(self) -> bool:
        return "tl.device_assert" in self.source

    def _launch_checked(self, launch, args, kwargs) -> None:
        """Launch under the interpreter with device asserts on: its builder ignores a
        kernel's ``debug=True`` (a GPU honours it), so a bad index would otherwise go
        unreported. A failed assert becomes the ``IndexError`` PyTorch would raise."""
        from triton.runtime import interpreter
        builder = interpreter.interpreter_builder
        options = builder.options
        builder.options = dataclasses.replace(options, debug=True)
        try:
            launch(*args, **kwargs)
        except Exception as e:
            if "index out of bounds" not in str(e):
                raise
            raise IndexError(f"{self.name}: {e.__cause__ or e}") from None
        finally:
            builder.options = options

    def call_source(self, name: str, args: list[str]) -> str:
        xnumel, rnumel = pycode(ir.size_expr(self.xnumel)), pycode(ir.size_expr(self.rnumel))
        sizes = f"{xnumel}, {rnumel}, " if self.is_reduction else f"{xnumel}, "
        sizes += "".join(f"{s}, " for s in self.size_args)
        blocks = f"XBLOCK={self.xblock}" + (f", RBLOCK={self.rblock}" if self.is_reduction
                                            else "")
        blocks += f", num_warps={self.num_warps}, num_stages={self.num_stages}"
        # (no tensor arguments at all: a kernel whose every buffer is empty at the sizes it
        # was compiled for, a symbolic size that was 0 there)
        grid = [f"(max(1, -(-({xnumel}) // {self.xblock})),)"] if self.symbolic else []
        return f"{name}({', '.join([*grid, *args, sizes + blocks])})"

    def __call__(self, *tensors: torch.Tensor) -> None:
        launch = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.is_reduction:
            self.launcher(*tensors, self.xnumel, self.rnumel, XBLOCK=self.xblock,
                          RBLOCK=self.rblock, **launch)
        else:
            self.launcher(*tensors, self.xnumel, XBLOCK=self.xblock, **launch)


def generate_triton_kernel(plan: KernelPlan, name: str, persistent: bool | None = None):
    kernel = TritonKernel(plan, name, persistent)
    source = kernel.generate()
    return source, list(kernel.inputs.values()), list(kernel.outputs.values()), \
        kernel.persistent


def compile_triton_kernel(plan: KernelPlan, name: str, persistent: bool | None = None):
    kernel = TritonKernel(plan, name, persistent)
    source = kernel.generate()
    ins, outs = list(kernel.inputs.values()), list(kernel.outputs.values())
    canonical = canonical_source(source, name, [a for a, _, _ in kernel.signature_buffers()])
    call = TritonKernelCall(name, source, [b.name for b in ins + outs], plan,
                            kernel.persistent, build_source=canonical,
                            size_args=kernel.size_args())
    return call, ins, outs


__all__ = ["TritonKernel", "TritonKernelCall", "choose_blocks", "choose_num_warps",
           "compile_triton_kernel", "config", "generate_triton_kernel"]
