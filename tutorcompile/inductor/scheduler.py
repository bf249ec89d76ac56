"""The scheduler: decide which buffers share a kernel, and say why the others do not.

Lowering gives one buffer per op -- one kernel each, every intermediate written to memory
and read back. On a CPU or a GPU that traffic, not the arithmetic, is what costs time. The
scheduler merges buffers into kernels:

* **vertical fusion** -- a producer into its consumer (``exp(x + b)``: one pass over memory);
* **reduction fusion** -- pointwise producers into a reduction, a reduction into the
  pointwise epilogue that reads it, and reductions over the same rows into each other
  (softmax, layernorm and RMSNorm become one kernel each);
* **horizontal fusion** -- siblings that read the same input share one pass over it.

Each candidate pair is checked by :meth:`Scheduler.can_fuse`, which answers ``(ok, reason)``:
extern kernels never fuse, a fusion must not create a cycle through a third kernel, the loop
nests must line up (:class:`~.codegen.common.KernelPlan`), and a trial code generation must
succeed (it catches, e.g., reading a reduction's result at another row). Pairs that can fuse
are taken greedily in order of :meth:`Scheduler.score_fusion` -- bytes of memory traffic the
fusion removes -- until nothing changes. Every candidate that stays apart keeps its reason in
the :class:`FusionReport`, along with kernel counts and bytes moved before and after.

Mirrors: torch/_inductor/scheduler.py (``Scheduler.fuse_nodes``, ``can_fuse``,
``score_fusion``, ``FusedSchedulerNode``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..fx.node import map_aggregate
from . import ir
from .codegen.common import FusionError, KernelPlan

MAX_FUSION_SIZE = 64
"""A kernel holds at most this many buffers (compile time grows with kernel size)."""


class Group:
    """A set of buffers that will be one kernel (one buffer at the start)."""

    def __init__(self, buffers: list[ir.Buffer]):
        self.buffers = buffers
        self.name = ""

    @property
    def is_extern(self) -> bool:
        return any(isinstance(b, ir.ExternKernel) for b in self.buffers)

    @property
    def names(self) -> set[str]:
        return {b.name for b in self.buffers}

    @property
    def first(self) -> int:
        return min(int(b.name[3:]) for b in self.buffers)

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
    kind: str                  # pointwise | reduction | extern
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
    """Fuse the buffers of a :class:`~.lowering.GraphLowering` into kernels."""

    def __init__(self, lowering, backend: str = "cpp"):
        self.lowering = lowering
        self.backend = backend
        self.buffers: list[ir.Buffer] = list(lowering.buffers)
        self.by_name = {b.name: b for b in self.buffers}
        self.reads: dict[str, set[str]] = {b.name: set(b.reads()) for b in self.buffers}
        self.users: dict[str, set[str]] = {b.name: set() for b in self.buffers}
        for name, reads in self.reads.items():
            for r in reads:
                if r in self.users:
                    self.users[r].add(name)
        self.output_names = self._output_buffers()
        self.groups: list[Group] = [Group([b]) for b in self.buffers]
        self.group_of: dict[str, Group] = {b.name: g for g in self.groups for b in g.buffers}
        self._trial_cache: dict[frozenset, str | None] = {}
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
        return {self.group_of[r] for b in group.buffers for r in self.reads[b.name]
                if r in self.group_of and self.group_of[r] is not group}

    def group_users(self, group: Group) -> set[Group]:
        return {self.group_of[u] for b in group.buffers for u in self.users[b.name]
                if self.group_of[u] is not group}

    def reaches(self, start: Group, goal: Group, avoid_direct: bool) -> bool:
        """Is there a path start -> ... -> goal through at least one other group?"""
        frontier = [g for g in self.group_users(start) if g is not goal] if avoid_direct \
            else [start]
        seen = set(map(id, frontier))
        while frontier:
            g = frontier.pop()
            for u in self.group_users(g):
                if u is goal:
                    return True
                if id(u) not in seen:
                    seen.add(id(u))
                    frontier.append(u)
        return False

    def merged(self, g1: Group, g2: Group) -> list[ir.Buffer]:
        return sorted(g1.buffers + g2.buffers, key=lambda b: int(b.name[3:]))

    def plan(self, buffers: list[ir.Buffer]) -> KernelPlan:
        return KernelPlan.from_nodes(buffers, self.stored_names(buffers))

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
        if self.reaches(g1, g2, True) or self.reaches(g2, g1, True):
            return False, ("fusing would create a cycle: another kernel sits between them "
                           "(it needs one's output and produces the other's input)")
        buffers = self.merged(g1, g2)
        if len(buffers) > MAX_FUSION_SIZE:
            return False, f"the kernel would hold more than {MAX_FUSION_SIZE} buffers"
        key = frozenset(b.name for b in buffers)
        if key not in self._trial_cache:
            self._trial_cache[key] = self._trial(buffers)
        reason = self._trial_cache[key]
        return (reason is None), (reason or "")

    def _trial(self, buffers: list[ir.Buffer]) -> str | None:
        """Plan and generate the fused kernel; the FusionError message if that fails."""
        try:
            plan = self.plan(buffers)
            if self.backend == "triton":
                from .codegen.triton import TritonKernel
                TritonKernel(plan, "trial").generate()
            else:
                from .codegen.cpp import CppKernel
                CppKernel(plan, "trial").generate()
        except FusionError as e:
            return str(e)
        return None

    def score_fusion(self, g1: Group, g2: Group) -> tuple[int, int]:
        """Bytes of memory traffic the fusion saves (then: prefer nearby groups)."""
        saved = 0
        for b in g2.buffers:
            for r in self.reads[b.name]:
                if r in g1.names:
                    saved += 2 * self.by_name[r].layout.nbytes   # no write + no read back
                elif self.group_of.get(r) is not None and any(
                        r in self.reads[a.name] for a in g1.buffers):
                    saved += self.by_name[r].layout.nbytes       # shared input read once
                elif r not in self.by_name and any(r in self.reads[a.name]
                                                    for a in g1.buffers):
                    saved += self._input_nbytes(r)
        return saved, -abs(g2.first - g1.first)

    def _input_nbytes(self, name: str) -> int:
        for b in self.lowering.graph_inputs:
            if b is not None and b.name == name:
                return b.layout.nbytes
        return 0

    def candidates(self) -> list[tuple[Group, Group, str]]:
        """Pairs worth considering: producer/consumer, and siblings sharing an input."""
        pairs: dict[tuple[int, int], tuple[Group, Group, str]] = {}
        readers: dict[str, list[Group]] = {}
        for g in self.groups:
            for b in g.buffers:
                for r in sorted(self.reads[b.name]):   # sorted: a stable order of candidates
                    if r in self.group_of and self.group_of[r] is not g:
                        p = self.group_of[r]
                        pairs.setdefault((id(p), id(g)), (p, g, "vertical"))
                    lst = readers.setdefault(r, [])
                    if g not in lst:
                        lst.append(g)
        for groups in readers.values():
            for i, a in enumerate(groups):
                for b in groups[i + 1:]:
                    if (id(a), id(b)) not in pairs and (id(b), id(a)) not in pairs:
                        first, second = (a, b) if a.first < b.first else (b, a)
                        pairs[(id(first), id(second))] = (first, second, "horizontal")
        return list(pairs.values())

    def fuse(self, enabled: bool = True) -> Scheduler:
        """Fuse greedily until no candidate can fuse; then name kernels and write the report."""
        while enabled:
            scored = sorted(self.candidates(), key=lambda c: self.score_fusion(c[0], c[1]),
                            reverse=True)
            changed = False
            for g1, g2, _ in scored:
                if g1 not in self.groups or g2 not in self.groups:
                    continue
                ok, _ = self.can_fuse(g1, g2)
                if ok:
                    self._merge(g1, g2)
                    changed = True
            if not changed:
                break
        self._order_groups()
        self._name_groups()
        self.report = self._make_report(enabled)
        return self

    def _merge(self, g1: Group, g2: Group) -> None:
        new = Group(self.merged(g1, g2))
        self.groups = [g for g in self.groups if g is not g1 and g is not g2] + [new]
        for b in new.buffers:
            self.group_of[b.name] = new
        self._order_groups()

    def _order_groups(self) -> None:
        """Topological order of groups, earliest buffer first among the ready ones."""
        remaining = list(self.groups)
        done: set[int] = set()
        ordered: list[Group] = []
        while remaining:
            ready = [g for g in remaining if all(id(d) in done for d in self.group_deps(g))]
            if not ready:
                raise RuntimeError("scheduler: the kernel graph has a cycle")
            g = min(ready, key=lambda g: g.first)
            ordered.append(g)
            done.add(id(g))
            remaining.remove(g)
        self.groups = ordered

    def _name_groups(self) -> None:
        for i, g in enumerate(self.groups):
            if g.is_extern:
                ext = g.buffers[0]
                target = getattr(ext.kernel, "name", getattr(ext.kernel, "__name__", "call"))
                g.name = f"extern_{target}_{i}"
                continue
            ops: list[str] = []
            for b in g.buffers:
                for o in b.origins:
                    t = getattr(o.target, "name", None) or getattr(o.target, "__name__", "op")
                    if t not in ops:
                        ops.append(t)
            kind = "red" if any(b.is_reduction for b in g.buffers) else "poi"
            short = "_".join(ops[:6]) + ("_etc" if len(ops) > 6 else "")
            g.name = f"{self.backend}_{kind}_fused_{short}_{i}"
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
            kind = "extern" if g.is_extern else (
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


def schedule(lowering, backend: str = "cpp", fusion: bool = True) -> Scheduler:
    """Fuse ``lowering``'s buffers (``fusion=False``: one kernel per buffer)."""
    return Scheduler(lowering, backend).fuse(enabled=fusion)


__all__ = ["FusionReport", "Group", "KernelInfo", "Refusal", "Scheduler", "schedule",
           "MAX_FUSION_SIZE"]
