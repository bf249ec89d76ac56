"""Fusion legality on the IR: may these buffers become one kernel? Decided before any code.

The scheduler asks this of every pair it might fuse (:meth:`.Scheduler.can_fuse`). A group
of buffers is one kernel when

* their loops line up (:meth:`~.codegen.common.KernelPlan.from_nodes`: one loop nest, each
  buffer a *phase* of it, or computed *inline* where it is read);
* every operation inside is pointwise: a prim that is not (a matmul, a sort) is a kernel
  of its own, never part of another's loop body;
* a reduction is read only after it is computed, and only at the row being computed: its
  value lives in a variable that holds one row, written by the loop that finishes it;
* a matmul template's epilogue reads the product only at the tile being computed (the
  accumulator holds that tile and nothing else), and nothing inlines a template.

The last two depend on the order a kernel computes its buffers and on the index at which it
evaluates each one, inline producers expanded at their readers' indices. So the check walks
the plan in the very order every code generator does (``KernelPlan.walk_phases``), at the
indices they use (``KernelPlan.node_index``, ``full_index``), running each inner function
under :class:`LegalityRecorder`: an ops handler that prints nothing and only remembers which
reductions are computed, at which row. Code generation then spells what was decided here;
its own checks of the same conditions are assertions that never fire.

Mirrors: torch/_inductor/scheduler.py (``Scheduler.can_fuse`` and the backends'
``can_fuse_vertical`` / ``can_fuse_horizontal``, which decide on the IR's nodes and their
dependencies, never by generating code).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy

from ..ops import set_handler
from . import ir
from .codegen.common import KernelPlan
from .ir import FusionError


class LegalityRecorder(ir._ReadRecorder):
    """Runs a kernel's inner functions as a kernel writer would, raising :class:`FusionError`
    where the writer could not write them.

    A load of a pointwise buffer of the kernel runs that buffer's inner function at the
    loaded index (inlined, once per buffer and index); a load of a reduction of the kernel
    must come after :meth:`computed` said it was computed, at the same row; a load of the
    matmul template (``template``) must be at the tile being computed (``product_index``).
    """

    def __init__(self, plan: KernelPlan, template: ir.TemplateBuffer | None = None,
                 product_index: Sequence[Any] = ()):
        super().__init__()
        self.inside = {n.name: n for n in plan.nodes}
        self.rows: dict[str, list] = {}        # reduction -> the row index it was computed at
        self.inlined: dict[tuple, Any] = {}
        self.template = template
        self.product_index = list(product_index)

    def computed(self, node: ir.ComputedBuffer, row: list) -> None:
        """The reduction ``node`` now holds its value for the row ``row``."""
        self.rows[node.name] = row

    def call(self, prim, args, kwargs):
        if not prim.is_pointwise:
            raise FusionError(f"{prim.name} cannot appear inside a kernel")
        return super().call(prim, args, kwargs)

    def load(self, buffer, index):
        node = self.inside.get(buffer.name)
        if node is None:   # read from memory
            return super().load(buffer, index)
        if node is self.template:
            size = node.get_size()
            at = ir.simplify_index(ir.flatten_index(self.product_index, size))
            here = ir.simplify_index(ir.flatten_index(index, size))
            if sympy.expand(at - here) != 0:
                raise FusionError(f"the epilogue reads the product {buffer.name} at another "
                                  "position than the tile being computed")
            return ir._Meta(node.get_dtype())
        if node.is_reduction:
            if node.name not in self.rows:
                raise FusionError(f"{node.name} (a reduction) is read before it is computed")
            if any(sympy.expand(sympy.sympify(a) - sympy.sympify(b)) != 0
                   for a, b in zip(index, self.rows[node.name])):
                raise FusionError(f"the reduction {node.name} is read at another row than the "
                                  "one being computed")
            return ir._Meta(node.get_dtype())
        key = (node.name, tuple(index))
        if key not in self.inlined:   # (a TemplateBuffer's inner function refuses itself)
            self.inlined[key] = node.data.inner_fn(index)
        return self.inlined[key]


def plan_refusal(plan: KernelPlan) -> str | None:
    """Why ``plan``'s kernel cannot be written (None: it can), found by evaluating every
    stored buffer at the loop position the kernel computes it, in the kernel's order."""
    rec = LegalityRecorder(plan)
    try:
        with set_handler(rec):
            if not plan.is_reduction:
                xvars = ir.unflatten_index(ir.index_symbol("x0"), plan.shape)
                for node in plan.nodes:
                    if node.name in plan.stored:
                        node.data.inner_fn(plan.node_index(node, xvars, []))
                return None
            xvars = ir.unflatten_index(ir.index_symbol("x0"), plan.kept_shape)
            rvars = ir.unflatten_index(ir.index_symbol("r0"), plan.reduced_shape)

            def store(node: ir.ComputedBuffer) -> None:
                node.data.inner_fn(plan.node_index(node, xvars, rvars))

            def stores(nodes: list[ir.ComputedBuffer]) -> None:
                for node in nodes:
                    store(node)

            def reduction(node: ir.ComputedBuffer, batch: list[ir.ComputedBuffer]) -> None:
                stores(batch)   # (in the reduction's loop, before its own value)
                node.data.inner_fn(plan.full_index(xvars, rvars))
                rec.computed(node, plan.node_index(node, xvars, rvars))

            plan.walk_phases(stores, store, reduction)
    except FusionError as e:
        return str(e)
    return None


def template_plan_refusal(plan: KernelPlan) -> str | None:
    """Why a matmul template with ``plan``'s epilogue cannot be one kernel (None: it can).

    The template computes a tile of its product at ``(batch..., rm, rn)``; each stored
    epilogue buffer is computed at the same element of its own shape."""
    template = plan.nodes[0]
    if not isinstance(template, ir.TemplateBuffer):
        return "a template kernel starts with its template buffer"
    out_size = tuple(template.get_size())
    batch = out_size[:-2]
    index = (ir.unflatten_index(ir.index_symbol("rb"), batch) if batch else []) + \
        [ir.index_symbol("rm"), ir.index_symbol("rn")]
    rec = LegalityRecorder(plan, template, index)
    try:
        with set_handler(rec):
            for node in plan.nodes[1:]:
                if node.name in plan.stored:
                    node.data.inner_fn(epilogue_index(node, index, out_size))
    except FusionError as e:
        return str(e)
    return None


def epilogue_index(node: ir.Buffer, index: list, out_size: tuple) -> list:
    """The index of an epilogue ``node``'s element at the template's ``index``: the same,
    or the same element in ``node``'s shape (an epilogue of another shape: a reshape)."""
    size = tuple(node.get_size())
    if ir.same_sizes(size, out_size):
        return index
    return ir.unflatten_index(ir.flatten_index(index, out_size), size)


def fusion_refusal(buffers: Sequence[ir.ComputedBuffer], stored: set[str],
                   reshaped: bool = True) -> str | None:
    """Why ``buffers`` (in dependency order; a matmul template first, if any) cannot be one
    kernel storing ``stored``: the reason, or None when they can. ``reshaped`` as in
    :meth:`~.codegen.common.KernelPlan.from_nodes`."""
    if isinstance(buffers[0], ir.TemplateBuffer):
        return template_plan_refusal(KernelPlan.template(buffers, stored))
    try:
        plan = KernelPlan.from_nodes(buffers, stored, reshaped)
    except FusionError as e:
        return str(e)
    return plan_refusal(plan)


__all__ = ["LegalityRecorder", "epilogue_index", "fusion_refusal", "plan_refusal",
           "template_plan_refusal"]
