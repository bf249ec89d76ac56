"""The scheduler: decide which buffers share a kernel, and say why the others do not.

Lowering gives one buffer per op -- one kernel each, every intermediate written to memory
and read back. On a CPU or a GPU that traffic, not the arithmetic, is what costs time. The
scheduler merges buffers into kernels:

* **vertical fusion** -- a producer into its consumer (``exp(x + b)``: one pass over memory);
* **reduction fusion** -- pointwise producers into a reduction, a reduction into the
  pointwise epilogue that reads it, and reductions over the same rows into each other
  (softmax, layernorm and RMSNorm become one kernel each); for Triton, a producer of the
  same elements in another shape joins a reduction in a second pass (a gradient
  ``[b, t, n]`` and its bias gradient, the column sum of it as ``[b*t, n]``: one kernel);
* **horizontal fusion** -- siblings that read the same input share one pass over it;
* **epilogue fusion** -- pointwise consumers of a matmul template (``mode="max-autotune"``)
  run on its output tile before it is stored (:meth:`Scheduler.template_refusal`).

Each candidate pair is checked by :meth:`Scheduler.can_fuse`, which answers ``(ok, reason)``
on the IR, before any code is written: extern kernels never fuse, a fusion must not create a
cycle through a third kernel, the loop nests must line up
(:class:`~.codegen.common.KernelPlan`), and the kernel's inner functions, walked in the order
a kernel computes them, must read each reduction after it is computed and at the row being
computed, and call only pointwise prims (:func:`~.fusion_legality.fusion_refusal`). Code
generation then only spells what the scheduler decided. Pairs that can fuse
are taken greedily in order of :meth:`Scheduler.score_fusion` -- bytes of memory traffic the
fusion removes -- until nothing changes. Every candidate that stays apart keeps its reason in
the :class:`FusionReport`, along with kernel counts and bytes moved before and after.

Mirrors: torch/_inductor/scheduler.py (``Scheduler.fuse_nodes``, ``can_fuse``,
``score_fusion``, ``FusedSchedulerNode``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import cast

from ..fx.node import map_aggregate
from . import config, ir
from .codegen.common import KernelPlan
from .fusion_legality import fusion_refusal


class Group:
    """A set of buffers that will be one kernel (one buffer at the start).

    A group never changes: fusing two groups makes a new one. What the scheduler asks of a
    group over and over is computed once here -- its buffer names, whether it is an extern
    call, its earliest buffer -- and the scheduler keeps ``deps`` / ``users`` (the groups it
    reads from and that read it) and ``pos`` (its place in a topological order) up to date
    as groups merge.
    """

    def __init__(self, buffers: list[ir.Buffer]):
        self.buffers = buffers
        self.name = ""
        self.names = frozenset(b.name for b in buffers)
        self.is_extern = any(isinstance(b, ir.ExternKernel) for b in buffers)
        self.is_template = isinstance(buffers[0], ir.TemplateBuffer)   # (always first)
        self.first = min(int(b.name[3:]) for b in buffers)
        self.deps: set[Group] = set()
        self.users: set[Group] = set()
        self.pos = 0

    def label(self) -> str:
        return "+".join(b.name for b in self.buffers)

    def __repr__(self) -> str:
        return f"Group({self.name or self.label()})"


@dataclass
class Refusal:
    first: str
    second: str
    kind: str      # "vertical" or "horizontal"
    reason: str

    def __str__(self) -> str:
        return f"{self.first} -> {self.second} ({self.kind}): {self.reason}"


@dataclass
class KernelInfo:
    name: str
    kind: str                  # pointwise | reduction | extern | template
    buffers: list[str]
    graph_nodes: list[str]
    stored: list[str]


@dataclass
class FusionReport:
    """What fusion did: kernel counts, bytes moved, and why the remaining pairs stayed apart.

    Bytes are counted the way the Triton softmax tutorial does by hand: a kernel reads each
    input buffer once and writes each output once (a broadcast input counts its own size).
    """
    kernels_before: int
    kernels_after: int
    bytes_read_before: int
    bytes_written_before: int
    bytes_read_after: int
    bytes_written_after: int
    kernels: list[KernelInfo] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    @property
    def bytes_before(self) -> int:
        return self.bytes_read_before + self.bytes_written_before

    @property
    def bytes_after(self) -> int:
        return self.bytes_read_after + self.bytes_written_after

    def __str__(self) -> str:
        def mb(n):
            return f"{n / 1e6:.3f} MB"
        lines = [f"kernels: {self.kernels_before} before fusion -> {self.kernels_after} after",
                 f"memory traffic: {mb(self.bytes_before)} (read {mb(self.bytes_read_before)}, "
                 f"written {mb(self.bytes_written_before)}) -> {mb(self.bytes_after)} (read "
                 f"{mb(self.bytes_read_after)}, written {mb(self.bytes_written_after)})"]
        for k in self.kernels:
            lines.append(f"  {k.name} [{k.kind}]: graph nodes {', '.join(k.graph_nodes)}; "
                         f"stores {', '.join(k.stored) or '-'}")
        if self.refused:
            lines.append("not fused:")
            lines.extend(f"  {r}" for r in self.refused)
        else:
            lines.append("not fused: nothing (every candidate pair was fused)")
        return "\n".join(lines)


class Scheduler:
    """Fuse the buffers of a :class:`~.lowering.GraphLowering` into kernels.

    The cost of scheduling grows about linearly with the graph: groups keep their
    dependencies (``Group.deps`` / ``Group.users``) and a topological position
    (``Group.pos``) that a merge updates locally, so a cycle check only walks the groups
    placed between the two it asks about, and a pair is scored once. ``work`` counts the
    elementary steps taken (groups visited, edges followed, candidates made), so that a test
    can check the growth without timing anything.
    """

    def __init__(self, lowering, codegen: str = "cpp"):
        self.lowering = lowering
        self.codegen = codegen
        self.buffers: list[ir.Buffer] = list(lowering.buffers)
        self.by_name = {b.name: b for b in self.buffers}
        self.reads: dict[str, set[str]] = {b.name: set(b.reads()) for b in self.buffers}
        self.users: dict[str, set[str]] = {b.name: set() for b in self.buffers}
        for name, reads in self.reads.items():
            for r in reads:
                if r in self.users:
                    self.users[r].add(name)
        self.output_names = self._output_buffers()
        self.input_nbytes = {b.name: b.layout.nbytes for b in lowering.graph_inputs
                             if b is not None}
        self.groups: list[Group] = [Group([b]) for b in self.buffers]
        self.group_of: dict[str, Group] = {b.name: g for g in self.groups for b in g.buffers}
        for g in self.groups:
            for r in self.reads[g.buffers[0].name]:
                p = self.group_of.get(r)
                if p is not None and p is not g:
                    g.deps.add(p)
                    p.users.add(g)
        self._refusal_cache: dict[tuple[frozenset, bool], str | None] = {}
        # may a pointwise node join a reduction's loops through a reshape? (see fuse)
        self.reshaped = codegen == "triton"
        self._score_cache: dict[tuple[Group, Group], tuple[int, int]] = {}
        self._updates: set[str] | None = None   # (holds_no_memory)
        self.work = 0
        self.report: FusionReport | None = None

    def _output_buffers(self) -> set[str]:
        names: set[str] = set()

        def visit(v):
            if isinstance(v, ir.IRNode):
                names.add(ir.base_buffer(v).name)
            return v
        map_aggregate(self.lowering.outputs, visit)
        return names

    # -- structure -----------------------------------------------------------------------
    def stored_names(self, buffers: list[ir.Buffer]) -> set[str]:
        """Buffers of a would-be kernel that someone outside it reads (or the caller)."""
        inside = {b.name for b in buffers}
        return {b.name for b in buffers
                if b.name in self.output_names or self.users[b.name] - inside}

    def group_deps(self, group: Group) -> set[Group]:
        """The groups ``group`` reads from."""
        return set(group.deps)

    def group_users(self, group: Group) -> set[Group]:
        """The groups that read ``group``."""
        return set(group.users)

    def reaches(self, start: Group, goal: Group, avoid_direct: bool) -> bool:
        """Is there a path start -> ... -> goal (through at least one other group if
        ``avoid_direct``)?

        Groups are kept in a topological order, so a path can only pass through groups
        placed between ``start`` and ``goal``: the search never looks further.
        """
        if start.pos > goal.pos:
            return False
        limit = goal.pos
        frontier = [g for g in start.users if g is not goal and g.pos < limit] \
            if avoid_direct else [start]
        seen = set(frontier)
        while frontier:
            g = frontier.pop()
            self.work += 1
            for u in g.users:
                self.work += 1
                if u is goal:
                    return True
                if u.pos < limit and u not in seen:
                    seen.add(u)
                    frontier.append(u)
        return False

    def merged(self, g1: Group, g2: Group) -> list[ir.Buffer]:
        return sorted(g1.buffers + g2.buffers, key=lambda b: int(b.name[3:]))

    def plan(self, buffers: list[ir.Buffer]) -> KernelPlan:
        """The kernel plan of a group of computed buffers (no extern call, no template)."""
        computed = cast(list[ir.ComputedBuffer], buffers)
        return KernelPlan.from_nodes(computed, self.stored_names(buffers), self.reshaped)

    # -- decisions -----------------------------------------------------------------------
    def can_fuse(self, g1: Group, g2: Group) -> tuple[bool, str]:
        """May ``g1`` and ``g2`` become one kernel? ``(True, "")`` or ``(False, reason)``."""
        for g in (g1, g2):
            if g.is_extern:
                ext = next(b for b in g.buffers if isinstance(b, ir.ExternKernel))
                return False, (f"{ext.name} is an extern kernel ({ext.reason}); nothing "
                               "fuses with a PyTorch call")
        if g1.buffers[0].get_device() != g2.buffers[0].get_device():
            return False, "different devices"
        if g1.is_template or g2.is_template:
            why = self.template_refusal(g1, g2)
            if why is not None:
                return False, why
        for a, b in ((g1, g2), (g2, g1)):
            realized = {x.name for x in a.buffers
                        if isinstance(x, ir.ComputedBuffer) and x.realized}
            read = next((r for y in b.buffers for r in self.reads[y.name] if r in realized),
                        None)
            if read is not None:
                return False, (f"{read} is compared with its own elements (a sort): its "
                               "readers load it from memory, so that every comparison sees "
                               "the same bits")
        if self.reaches(g1, g2, True) or self.reaches(g2, g1, True):
            return False, ("fusing would create a cycle: another kernel sits between them "
                           "(it needs one's output and produces the other's input)")
        buffers = self.merged(g1, g2)
        if len(buffers) > config.max_fusion_size:
            return False, f"the kernel would hold more than {config.max_fusion_size} buffers"
        key = (frozenset(b.name for b in buffers), self.reshaped)
        if key not in self._refusal_cache:
            self._refusal_cache[key] = fusion_refusal(
                cast(list[ir.ComputedBuffer], buffers), self.stored_names(buffers),
                self.reshaped)
        reason = self._refusal_cache[key]
        return (reason is None), (reason or "")

    def template_refusal(self, g1: Group, g2: Group) -> str | None:
        """A matmul template takes only an *epilogue*: pointwise buffers that read its
        product (directly or through each other) and iterate the product's elements. None
        if ``g2`` is one for ``g1``; else the reason."""
        template = (g1 if g1.is_template else g2).buffers[0]
        if g2.is_template:
            return (f"{template.name} is a matmul template: nothing fuses into its inputs "
                    "(only pointwise consumers of its product, as an epilogue)")
        if g2 not in g1.users:
            return (f"{template.name} is a matmul template: it fuses only with consumers of "
                    "its product")
        numel = ir.size_expr(template.layout.numel)
        for b in g2.buffers:
            if b.is_reduction or not isinstance(b, ir.ComputedBuffer):
                return f"{b.name} is not pointwise: a matmul template's epilogue is pointwise"
            if ir.size_expr(b.layout.numel) != numel:
                return (f"{b.name} has {b.layout.numel} elements, the matmul template "
                        f"{template.name}'s product {template.layout.numel}: an epilogue "
                        "computes one element per element of the product")
        return None

    def score_fusion(self, g1: Group, g2: Group) -> tuple[int, int]:
        """Bytes of memory traffic the fusion saves (then: prefer nearby groups)."""
        key = (g1, g2)
        if key not in self._score_cache:
            g1_reads = {r for a in g1.buffers for r in self.reads[a.name]}
            saved = 0
            for b in g2.buffers:
                for r in self.reads[b.name]:
                    self.work += 1
                    if r in g1.names:
                        saved += 2 * self.by_name[r].layout.nbytes   # no write + no read back
                    elif r in g1_reads:                               # shared input read once
                        saved += self.by_name[r].layout.nbytes if r in self.by_name \
                            else self.input_nbytes.get(r, 0)
            self._score_cache[key] = (saved, -abs(g2.first - g1.first))
        return self._score_cache[key]

    def _input_nbytes(self, name: str) -> int:
        return self.input_nbytes.get(name, 0)

    def candidates(self) -> list[tuple[Group, Group, str]]:
        """Pairs worth considering: producer/consumer, and siblings sharing an input (at
        most ``config.horizontal_window`` groups apart)."""
        pairs: dict[tuple[Group, Group], tuple[Group, Group, str]] = {}
        readers: dict[str, dict[Group, None]] = {}   # an ordered set per buffer
        for g in self.groups:
            for b in g.buffers:
                for r in sorted(self.reads[b.name]):   # sorted: a stable order of candidates
                    self.work += 1
                    p = self.group_of.get(r)
                    if p is not None and p is not g:
                        pairs.setdefault((p, g), (p, g, "vertical"))
                    readers.setdefault(r, {})[g] = None
        for group_set in readers.values():
            groups = list(group_set)   # in the order of the groups: by position
            for i, a in enumerate(groups):
                for c in groups[i + 1:]:
                    if c.pos - a.pos > config.horizontal_window:
                        break
                    self.work += 1
                    if (a, c) not in pairs and (c, a) not in pairs:
                        first, second = (a, c) if a.first < c.first else (c, a)
                        pairs[(first, second)] = (first, second, "horizontal")
        return list(pairs.values())

    def fuse(self, enabled: bool = True) -> Scheduler:
        """Fuse greedily until no candidate can fuse; then name kernels and write the report.

        Each round scores every candidate pair (a pair's score is computed once: groups
        never change) and takes them best first; a pair whose group was already fused in
        this round waits for the next round, when the fused group makes new pairs.

        Two passes: the first fuses only what lines up without a reshape; the second also
        lets a pointwise node of another shape but the same elements join a reduction's
        loops (a GELU's gradient ``[b, t, n]`` into its bias gradient, a column sum of it as
        ``[b*t, n]``). Allowed from the start, that freedom splits chains: a layer norm's
        input gradient -- pointwise ops after the row sums -- was pulled half into the
        kernel of the next bias gradient, and the row kernel stored intermediates of the
        full size for it. After the first pass such a chain is one group with its row
        reductions, and only what is left (a producer whose kernel has no reduction) joins
        a column reduction.

        The second pass is Triton's only. A C++ column reduction walks tiles of 32 columns
        down the rows; a producer fused into it is computed and stored in that strided
        order too, which measured slower on this project's CPU than the producer's own
        contiguous pass plus the sum reading its (cached) result (a transformer's gradient
        with its bias gradient: benchmarks/MEASUREMENTS.md).
        """
        self._order_groups()
        passes = (False, True) if self.codegen == "triton" else (False,)
        for reshaped in (passes if enabled else ()):
            self.reshaped = reshaped
            while self._fusion_round(self.candidates):
                self._order_groups()
        self.reshaped = self.codegen == "triton"
        while enabled and self._fusion_round(self.unrelated_kernels):
            self._order_groups()
        self._name_groups()
        self.report = self._make_report(enabled)
        return self

    def unrelated_kernels(self) -> list[tuple[Group, Group, str]]:
        """Last, kernels over the same loops (the same shape, reduced over the same dims)
        that share nothing -- the bias gradients of a transformer's query, key and value
        projections, each the column sum of another matmul's output; the per-parameter
        updates of an optimizer step, for the parameters of one shape -- paired with the
        next such kernel in the order: one kernel runs them one after the other, one call
        (and, with threads, one parallel region) instead of several. They save no memory
        traffic, so they wait until nothing else fuses; and they run where the later one
        stood, keeping the earlier one's inputs alive until then, so a kernel's buffers span
        at most ``config.unrelated_span`` buffers of the graph (unbounded, a GPT's five
        layer norms' weight gradients became one kernel at the end of the backward, keeping
        every layer's gradient alive for it) -- unless neither kernel holds memory of the
        graph's (:meth:`holds_no_memory`: an optimizer's updates, written into the
        parameters and state in place), when moving them costs nothing. Pointwise kernels
        pair only so: nearby ones over the same loops with intermediates of their own were
        not measured to gain.
        Mirrors Inductor's combo kernels (``combo_kernels`` in its config)."""
        by_loops: dict[tuple, list[Group]] = {}
        for g in self.groups:
            if g.is_extern or g.is_template:
                continue
            reduction = next((b for b in g.buffers if isinstance(b, ir.ComputedBuffer)
                              and b.is_reduction), None)
            key: tuple
            if reduction is not None:
                data = reduction.reduction
                key = (tuple(ir.size_expr(s) for s in data.src_shape), tuple(data.reduced_dims))
            else:
                key = ("pointwise", tuple(ir.size_expr(s) for s in g.buffers[-1].layout.size))
            by_loops.setdefault(key, []).append(g)
        return [(a, b, "horizontal") for key, groups in by_loops.items()
                for a, b in zip(groups, groups[1:])
                if key[0] != "pointwise" and self._span(a, b) <= config.unrelated_span
                or self.holds_no_memory(a) and self.holds_no_memory(b)]

    def holds_no_memory(self, group: Group) -> bool:
        """Does ``group`` read only graph inputs and scalars, and store only new values of
        graph inputs (what AOT writes back: ``input_updates``) and scalars? Then wherever it
        runs, no buffer of the graph lives longer for it."""
        if self._updates is None:
            updates = self.lowering.graph.output_node.meta.get("input_updates") or {}
            outputs = self.lowering.outputs
            self._updates = {ir.base_buffer(outputs[i]).name for i in updates} \
                if isinstance(outputs, (tuple, list)) else set()
        scalar = config.unrelated_scalar_bytes
        names = {b.name for b in group.buffers}
        reads = {r for b in group.buffers for r in self.reads[b.name]} - names
        return all(r in self.input_nbytes or r in self.by_name
                   and self.by_name[r].layout.nbytes <= scalar for r in reads) and all(
            n in self._updates or self.by_name[n].layout.nbytes <= scalar
            for n in self.stored_names(group.buffers))

    @staticmethod
    def _span(a: Group, b: Group) -> int:
        numbers = [int(x.name[3:]) for x in a.buffers + b.buffers]
        return max(numbers) - min(numbers)

    def _fusion_round(self, candidates) -> bool:
        """One round of greedy fusion over ``candidates()``: did anything fuse?"""
        scored = sorted(candidates(), key=lambda c: self.score_fusion(c[0], c[1]),
                        reverse=True)
        alive = set(self.groups)   # ordered, no empty slots at the start of a round
        changed = False
        for g1, g2, _ in scored:
            if g1 not in alive or g2 not in alive:
                continue
            ok, _ = self.can_fuse(g1, g2)
            if ok:
                alive.add(self._merge(g1, g2))
                alive -= {g1, g2}
                changed = True
        return changed

    def _merge(self, g1: Group, g2: Group) -> Group:
        """Replace ``g1`` and ``g2`` by one group, updating only what touches them.

        The new group takes the later one's place in the topological order. Groups placed
        between the two that the earlier one reaches move behind the new group (they cannot
        reach the later one: ``can_fuse`` refused that), so the order stays topological
        without sorting everything again.
        """
        new = Group(self.merged(g1, g2))
        for b in new.buffers:
            self.group_of[b.name] = new
        new.deps = (g1.deps | g2.deps) - {g1, g2}
        new.users = (g1.users | g2.users) - {g1, g2}
        for d in new.deps:
            self.work += 1
            d.users -= {g1, g2}
            d.users.add(new)
        for u in new.users:
            self.work += 1
            u.deps -= {g1, g2}
            u.deps.add(new)
        early, late = (g1, g2) if g1.pos < g2.pos else (g2, g1)
        limit = late.pos
        behind: set[Group] = set()
        frontier = [early]
        while frontier:
            g = frontier.pop()
            for u in g.users:
                self.work += 1
                if u.pos < limit and u not in behind:
                    behind.add(u)
                    frontier.append(u)
        # self.groups keeps one slot per position during a round (None: fused away)
        window = [g for g in self.groups[early.pos + 1:late.pos] if g is not None]
        self.work += len(window) + 1
        slots: list[Group | None] = [g for g in window if g not in behind]
        slots += [new] + [g for g in window if g in behind]
        slots += [None] * (late.pos - early.pos + 1 - len(slots))
        self.groups[early.pos:late.pos + 1] = slots  # type: ignore[assignment]
        for i, slot in enumerate(slots, early.pos):
            if slot is not None:
                slot.pos = i
        return new

    def _order_groups(self) -> None:
        """Topological order of groups, earliest buffer first among the ready ones."""
        groups = [g for g in self.groups if g is not None]
        waiting = {g: len(g.deps) for g in groups}
        ready = [(g.first, id(g), g) for g in groups if not waiting[g]]   # first: unique
        heapq.heapify(ready)
        ordered: list[Group] = []
        while ready:
            _, _, g = heapq.heappop(ready)
            g.pos = len(ordered)
            ordered.append(g)
            for u in g.users:
                self.work += 1
                waiting[u] -= 1
                if not waiting[u]:
                    heapq.heappush(ready, (u.first, id(u), u))
        if len(ordered) != len(groups):
            raise RuntimeError("scheduler: the kernel graph has a cycle")
        self.groups[:] = ordered

    def _name_groups(self) -> None:
        for i, g in enumerate(self.groups):
            if g.is_extern:
                ext = cast(ir.ExternKernel, g.buffers[0])
                target = getattr(ext.kernel, "name", None)     # a prim's name
                if not isinstance(target, str):    # (an operator's ``name`` is a method)
                    target = getattr(ext.kernel, "__name__", "call").split(".")[0]
                g.name = f"extern_{target}_{i}"
                continue
            ops: list[str] = []
            for b in g.buffers:
                for o in b.origins:
                    t = str(getattr(o.target, "name", None)
                            or getattr(o.target, "__name__", "op"))
                    if t not in ops:
                        ops.append(t)
            kind = "tem" if g.is_template else \
                "red" if any(b.is_reduction for b in g.buffers) else "poi"
            short = "_".join(ops[:6]) + ("_etc" if len(ops) > 6 else "")
            g.name = f"{self.codegen}_{kind}_fused_{short}_{i}"
        for g in self.groups:
            for b in g.buffers:
                for o in b.origins:
                    o.meta["kernel"] = g.name

    # -- accounting ----------------------------------------------------------------------
    def _nbytes(self, name: str) -> int:
        if name in self.by_name:
            return self.by_name[name].layout.nbytes
        return self._input_nbytes(name)

    def _make_report(self, enabled: bool) -> FusionReport:
        read_before = sum(self._nbytes(r) for b in self.buffers for r in self.reads[b.name])
        written_before = sum(b.layout.nbytes for b in self.buffers)
        read_after = written_after = 0
        kernels = []
        for g in self.groups:
            inside = g.names
            reads = {r for b in g.buffers for r in self.reads[b.name]} - inside
            stored = sorted(self.stored_names(g.buffers), key=lambda n: int(n[3:])) \
                if not g.is_extern else [b.name for b in g.buffers]
            read_after += sum(self._nbytes(r) for r in reads)
            written_after += sum(self.by_name[s].layout.nbytes for s in stored)
            kind = "extern" if g.is_extern else "template" if g.is_template else (
                "reduction" if any(b.is_reduction for b in g.buffers) else "pointwise")
            nodes: list[str] = []
            for b in g.buffers:
                for o in b.origins:
                    if o.name not in nodes:
                        nodes.append(o.name)
            kernels.append(KernelInfo(g.name, kind, [b.name for b in g.buffers], nodes, stored))
        refused = []
        if enabled:
            position = {id(g): i for i, g in enumerate(self.groups)}
            pairs = sorted(self.candidates(),
                           key=lambda c: (position[id(c[0])], position[id(c[1])]))
            for g1, g2, kind in pairs:
                ok, reason = self.can_fuse(g1, g2)
                refused.append(Refusal(g1.name, g2.name, kind, reason or "not chosen"))
        else:
            refused.append(Refusal("*", "*", "all", "fusion disabled"))
        return FusionReport(len(self.buffers), len(self.groups), read_before, written_before,
                            read_after, written_after, kernels, refused)


def schedule(lowering, codegen: str = "cpp", fusion: bool = True) -> Scheduler:
    """Fuse ``lowering``'s buffers (``fusion=False``: one kernel per buffer)."""
    return Scheduler(lowering, codegen).fuse(enabled=fusion)


__all__ = ["FusionReport", "Group", "KernelInfo", "Refusal", "Scheduler", "schedule"]
