"""A Triton matmul *template*: ``a @ b`` (``+ bias``) in tiles, with fused pointwise epilogues.

Pointwise and reduction kernels are generated from loop IR; a matrix product is not, because
what makes it fast is a fixed shape of loops that no fusion of loops finds -- so Inductor
writes it by hand once, as a template, and fills in the parts that vary. The shape:

* **Tiles of the output.** Each program computes a ``BLOCK_M x BLOCK_N`` tile of ``C``: rows
  ``rm`` and columns ``rn`` (``[BLOCK_M, 1]`` and ``[1, BLOCK_N]`` blocks, so every
  expression over them is a 2-d tile by broadcasting).
* **A loop over K.** The tile is ``sum_k A[rm, k] * B[k, rn]``: walk ``k`` in steps of
  ``BLOCK_K``, load a ``BLOCK_M x BLOCK_K`` block of ``A`` and a ``BLOCK_K x BLOCK_N`` block
  of ``B`` and add their product (``tl.dot``, the tensor cores on a GPU) into an accumulator.
  Per tile that reads ``(BLOCK_M + BLOCK_N) * K`` elements for ``BLOCK_M * BLOCK_N * K``
  multiply-adds: bigger tiles reuse each loaded element more, until the tile no longer fits
  in registers -- which is why block sizes are tuned per shape and per device.
* **float32 accumulation.** The accumulator is float32 whatever the inputs (float16 and
  bfloat16 operands go to ``tl.dot`` as they are and come out in float32 -- except under
  the CPU interpreter, whose bfloat16 ``tl.dot`` returns garbage (Triton 3.7): there they
  are widened to float32 first, the same products at interpreter speed); the result is
  rounded to the output dtype only when it is stored. Float32 operands are multiplied as
  PyTorch multiplies them (:func:`fp32_precision`): in full precision
  (``input_precision="ieee"``) unless ``torch.backends.cuda.matmul.allow_tf32`` is set.
  Triton's own default on a GPU is TF32, 10 bits of mantissa: a template that silently
  used it would be a different, less exact answer than the ``torch.mm`` it replaces.
* **Masks for ragged edges.** ``M``, ``N`` and ``K`` need not be multiples of the blocks (a
  33 x 17 @ 17 x 45 product has a ragged tile in every direction): every load is masked
  with the indices it uses (``(rm < M) & (rka < K)``) and reads 0 outside, which adds
  nothing to the sum; the store is masked with ``(rm < M) & (rn < N)``.
* **Grouped ordering (``GROUP_M``).** Programs run roughly in order of their id. Walking
  tiles row by row, consecutive programs share a row of ``A`` but each needs a different
  column block of ``B``; walking ``GROUP_M`` rows of tiles column by column lets a group
  of programs reuse the same blocks of ``A`` *and* ``B`` from the L2 cache.
* **Batches.** A batched product (``bmm``) is a second grid axis: ``program_id(1)`` is the
  batch index, unflattened into the output's batch dimensions; an operand with fewer batch
  dimensions (a 2-d weight) broadcasts, i.e. ignores them.
* **Epilogue.** Before the store, the tile is still in registers: a bias add, an activation,
  a residual add, a cast -- pointwise consumers of the product the scheduler fused into the
  template (:meth:`~..scheduler.Scheduler.can_fuse`) -- run on it there, with their own
  loads at the same ``(rm, rn)`` positions. The product itself is written only if something
  outside the kernel reads it.

Operands are read through their loaders (``a.make_loader()``), like any kernel reads a value:
a transposed weight is a view, and its load is an index expression with swapped strides, no
copy. Sizes are literals: ``mode="max-autotune"`` compiles for the inputs' own sizes.

Mirrors: torch/_inductor/kernel/mm.py (``mm_template``, ``tuned_mm``, ``tuned_addmm``),
torch/_inductor/kernel/bmm.py, torch/_inductor/select_algorithm.py
(``TritonTemplateKernel``: epilogue fusion) and the Triton tutorial
python/tutorials/03-matrix-multiplication.py (tiles, the K loop, grouped ordering).
"""

from __future__ import annotations

import math
from typing import Any

import sympy
import torch

from ...ops import ops, set_handler
from .. import config, ir
from ..codecache import triton_module
from .common import (
    HALF_DTYPES,
    CSEVar,
    FusionError,
    KernelPlan,
    canonical_source,
    origin_names,
    origin_sources,
    print_index,
)
from .triton import TRITON_PRELUDE, TritonKernel, interpreted

TEMPLATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# the index symbols of the template -- rows, columns, the K block (as a row of A's block and
# as a column of B's) -- and the mask each one needs in a load or a store (the batch index
# ``rb`` needs none: the grid has exactly one program row per batch)
_MASKS = {"rm": "mmask", "rn": "nmask", "rka": "kmask_a", "rkb": "kmask_b"}


def template_shapes(a: ir.IRNode, b: ir.IRNode) -> tuple[tuple, int, int, int]:
    """(batch shape, M, N, K) of ``a @ b`` with broadcast batch dimensions."""
    sa, sb = tuple(a.get_size()), tuple(b.get_size())
    batch = tuple(torch.broadcast_shapes(sa[:-2], sb[:-2]))
    return batch, sa[-2], sb[-1], sa[-1]


def matmul_configs(m: int, n: int, k: int) -> list[tuple[int, int, int, int, int]]:
    """Candidate ``(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)`` for an M x K @ K x N
    product: Inductor's usual GPU configs, shrunk to the problem (blocks of at least 16,
    ``tl.dot``'s smallest). Under the interpreter, each program costs milliseconds: two
    configs of large blocks.

    Mirrors: ``mm_configs`` in torch/_inductor/kernel/mm_common.py."""
    if interpreted():
        raw = [(64, 64, 32, 4, 2), (32, 32, 32, 4, 2)]
    else:
        raw = [(64, 64, 32, 4, 2), (64, 128, 32, 4, 3), (128, 64, 32, 4, 3),
               (128, 128, 32, 8, 3), (64, 64, 64, 4, 3), (32, 32, 32, 2, 2)]

    def fit(block: int, size: int) -> int:
        return max(16, min(block, 1 << max(int(size) - 1, 0).bit_length()))
    seen: list[tuple] = []
    for bm, bn, bk, warps, stages in raw:
        config = (fit(bm, m), fit(bn, n), fit(bk, k), warps, stages)
        if config not in seen:
            seen.append(config)
    return seen


def fp32_precision() -> str:
    """How ``tl.dot`` multiplies float32 operands: as ``torch.mm`` does on this device --
    ``"tf32"`` where PyTorch is allowed TF32 on a GPU, else ``"ieee"`` (full precision;
    always under the interpreter)."""
    if not interpreted() and torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    return "ieee"


class TritonTemplateKernel(TritonKernel):
    """Writes the matmul template of a :class:`~..ir.TemplateBuffer` and its epilogue nodes.

    ``buffers`` are the template buffer then the pointwise buffers fused into it; ``stored``
    those that something outside the kernel reads. Loads and stores are masked with the
    masks of the index symbols their addresses use; a load of the product at the tile being
    computed is the accumulator itself (the scheduler fuses no epilogue that reads it
    elsewhere: ``fusion_legality``)."""

    def __init__(self, buffers: list[ir.ComputedBuffer], stored: set[str], name: str,
                 config: tuple | None = None):
        template = buffers[0]
        if not isinstance(template, ir.TemplateBuffer):   # (the scheduler refuses this)
            raise FusionError("a template kernel starts with its template buffer")
        super().__init__(KernelPlan.template(buffers, stored), name)
        self.template = template
        self.config = config or template.config
        self.batch, self.m, self.n, self.k = template_shapes(template.a, template.b)
        self.raw_loads = False
        self.product: CSEVar | None = None
        self.product_index: list = []

    # -- masks, loads and stores of a tile -----------------------------------------------
    @staticmethod
    def mask_of(deps) -> str | None:
        masks = [mask for sym, mask in _MASKS.items() if sym in deps]
        return " & ".join(masks) if masks else None

    def loaded(self, text: str, dtype: torch.dtype, deps: frozenset[str]) -> CSEVar:
        if self.raw_loads:   # a matmul operand goes to tl.dot in its own dtype
            return self.cse(text, dtype, deps)
        return super().loaded(text, dtype, deps)

    def load(self, buffer, index):
        if buffer.name == self.template.name:
            at = ir.simplify_index(ir.flatten_index(self.product_index, self.template.get_size()))
            here = ir.simplify_index(ir.flatten_index(index, self.template.get_size()))
            if sympy.expand(at - here) != 0:   # (refused by fusion_legality: never reached)
                raise FusionError(f"the epilogue reads the product {buffer.name} at another "
                                  "position than the tile being computed; the scheduler "
                                  "should have refused this fusion")
            return self.product
        return super().load(buffer, index)

    def store(self, node: ir.ComputedBuffer, index, value: CSEVar) -> None:
        self.outputs.setdefault(node.name, node)
        expr = node.layout.offset_of(index)
        used = {s.name for s in getattr(expr, "free_symbols", ())}
        # the address is a full tile even if the offset skips an index (a size-1 dim)
        widen = "".join(f" + 0 * {n}" for n in ("rm", "rn") if n not in used)
        text = str(value)
        if node.get_dtype() in HALF_DTYPES:
            text = self.narrow(value, node.get_dtype())
        elif value.dtype != node.get_dtype():
            text = f"{value}.to({self.dtype_name(node.get_dtype())})"
        addr = f"{self.out_name(node.name)} + {print_index(expr, 'triton')}{widen}"
        self.writeline(f"tl.store({addr}, {text}, mmask & nmask)")

    # -- the template --------------------------------------------------------------------
    def generate_body(self) -> None:
        t = self.template
        m, n, k = self.m, self.n, self.k
        out_size = tuple(t.get_size())
        batch_vars = ir.unflatten_index(ir.index_symbol("rb"), self.batch) if self.batch else []
        rm, rn, rka, rkb = (ir.index_symbol(s) for s in ("rm", "rn", "rka", "rkb"))
        w = self.writeline
        with set_handler(self):
            w("# which tile: programs walk GROUP_M rows of tiles column by column (L2 reuse)")
            w("pid = tl.program_id(0)")
            w(f"num_pid_m = tl.cdiv({m}, BLOCK_M)")
            w(f"num_pid_n = tl.cdiv({n}, BLOCK_N)")
            w("num_pid_in_group = GROUP_M * num_pid_n")
            w("first_pid_m = (pid // num_pid_in_group) * GROUP_M")
            w("group_size_m = min(num_pid_m - first_pid_m, GROUP_M)")
            w("pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)")
            w("pid_n = (pid % num_pid_in_group) // group_size_m")
            w("rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]")
            w("rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]")
            w(f"mmask = rm < {m}")
            w(f"nmask = rn < {n}")
            if self.batch:
                w("rb = tl.program_id(1)  # the batch index")
            w("acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)")
            w(f"for k in range(0, {k}, BLOCK_K):")
            self.indent += 1
            self.push_scope()
            w("rka = k + tl.arange(0, BLOCK_K)[None, :]")
            w("rkb = k + tl.arange(0, BLOCK_K)[:, None]")
            w(f"kmask_a = rka < {k}")
            w(f"kmask_b = rkb < {k}")
            a_dtype = t.a.get_dtype()
            # half operands go to tl.dot as they are (fp32 accumulation) -- except under the
            # interpreter, whose bfloat16 dot returns garbage: there they are widened first
            self.raw_loads = a_dtype in HALF_DTYPES and not interpreted()
            a = self._operand(t.a, batch_vars, [rm, rka], "[BLOCK_M, BLOCK_K]")
            b = self._operand(t.b, batch_vars, [rkb, rn], "[BLOCK_K, BLOCK_N]")
            self.raw_loads = False
            precision = "" if a.dtype in HALF_DTYPES else \
                f", input_precision=\"{fp32_precision()}\""
            w(f"acc += tl.dot({a}, {b}{precision})")
            self.pop_scope()
            self.indent -= 1
            product = CSEVar("acc", torch.float32, frozenset({"rm", "rn"}))
            index = list(batch_vars) + [rm, rn]
            if t.bias is not None:
                w("# addmm: the bias is added to the float32 tile")
                bias = _broadcast_load(t.bias, out_size, index)
                product = ops.add(product, bias)
            if t.get_dtype() in HALF_DTYPES:   # what eager's product is: rounded once
                product = self.cse(self.round_to(product, t.get_dtype()), torch.float32,
                                   product.deps)
            self.product, self.product_index = product, index
            if len(self.plan.nodes) > 1:
                w("# epilogue: the fused pointwise consumers of the product, on the tile")
            for node in self.plan.nodes:
                if node.name not in self.plan.stored:
                    continue
                own = self._index_for(node, index, out_size)
                value = product if node is t else node.data.inner_fn(own)
                self.store(node, own, value)

    def _operand(self, value: ir.IRNode, batch_vars: list, tile: list,
                 block: str) -> CSEVar:
        """Load a ``block`` of a matmul operand (its batch dims broadcast against the
        output's). ``tl.dot`` takes full 2-d blocks: an operand that does not vary along
        a dimension (an expanded row, a broadcast scalar) is broadcast to the block."""
        nbatch = len(value.get_size()) - 2
        sizes = tuple(value.get_size())[:nbatch]
        lead = len(batch_vars) - nbatch
        own = [0 if sizes[d] == 1 and self.batch[lead + d] != 1 else batch_vars[lead + d]
               for d in range(nbatch)]
        loaded = value.make_loader()(own + tile)
        if not {t.name for t in tile} <= loaded.deps:
            loaded = self.cse(f"tl.broadcast_to({loaded}, {block})", loaded.dtype,
                              loaded.deps | {t.name for t in tile})
        return loaded

    @staticmethod
    def _index_for(node: ir.Buffer, index: list, out_size: tuple) -> list:
        size = tuple(node.get_size())
        if ir.same_sizes(size, out_size):
            return index
        return ir.unflatten_index(ir.flatten_index(index, out_size), size)

    def generate(self) -> str:
        self.generate_body()
        params = [arg for arg, _, _ in self.signature_buffers()]
        params += ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr",
                   "GROUP_M: tl.constexpr"]
        t = self.template
        what = "addmm" if t.bias is not None else ("bmm" if self.batch else "mm")
        batch = "x".join(map(str, self.batch)) + " x " if self.batch else ""
        epilogue = [b.name for b in self.plan.nodes[1:]]
        jit = "@triton.jit(debug=True)" if self.index_checks else "@triton.jit"
        header = [jit, f"def {self.name}({', '.join(params)}):",
                  f"    # matmul template ({what}, {batch}{self.m}x{self.k} @ {self.k}x{self.n})"
                  + (f", epilogue {', '.join(epilogue)}" if epilogue else "")
                  + f"; graph nodes: {', '.join(origin_names(self.plan.nodes))}",
                  *(f"    #   {line}" for line in origin_sources(self.plan.nodes))]
        footer = [f"# max-autotune: {t.autotune_note}"] if t.autotune_note else []
        return "\n".join(header + ["    " + line for line in self.lines] + footer)


def _broadcast_load(value: ir.IRNode, out_size: tuple, index: list) -> Any:
    size = tuple(value.get_size())
    lead = len(out_size) - len(size)
    return value.make_loader()([0 if size[k] == 1 and out_size[lead + k] != 1
                                else index[lead + k] for k in range(len(size))])


class TemplateKernelCall:
    """A compiled matmul template ready to launch: ``call(*tensors)``, inputs then outputs,
    on a grid fixed at compile time (tiles, then the batch)."""

    launcher_doc = "Triton matmul template: kernel[grid], the grid fixed at compile time"

    def __init__(self, name: str, source: str, build_source: str, config: tuple,
                 m: int, n: int, batch: tuple):
        self.name = name
        self.source = source
        self.config = config
        self.grid = (math.ceil(m / config[0]) * math.ceil(n / config[1]),
                     max(1, math.prod(batch)))
        self.fn = triton_module(TRITON_PRELUDE + build_source + "\n", "kernel").kernel

    @property
    def launcher(self):
        return self.fn[self.grid]

    def _constexprs(self) -> dict[str, int]:
        bm, bn, bk, warps, stages = self.config
        return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": config.template_group_m,
                "num_warps": warps, "num_stages": stages}

    def call_source(self, name: str, args: list[str]) -> str:
        consts = ", ".join(f"{k}={v}" for k, v in self._constexprs().items())
        return f"{name}({', '.join(args)}, {consts})"

    def __call__(self, *tensors: torch.Tensor) -> None:
        self.launcher(*tensors, **self._constexprs())


def compile_template_kernel(buffers: list[ir.ComputedBuffer], stored: set[str], name: str,
                            config: tuple | None = None):
    """Generate and load the template kernel: ``(call, input buffers, output buffers)``."""
    kernel = TritonTemplateKernel(buffers, stored, name, config)
    source = kernel.generate()
    ins, outs = list(kernel.inputs.values()), list(kernel.outputs.values())
    canonical = canonical_source(source, name, [a for a, _, _ in kernel.signature_buffers()])
    call = TemplateKernelCall(name, source, canonical, kernel.config, kernel.m, kernel.n,
                              kernel.batch)
    return call, ins, outs


__all__ = ["TEMPLATE_DTYPES", "TemplateKernelCall", "TritonTemplateKernel",
           "compile_template_kernel", "fp32_precision", "matmul_configs", "template_shapes"]
