"""Side by side with PyTorch's AOTAutograd: saved bytes of both partitioners, ours and theirs.

:func:`pytorch_partition` runs ``torch._functorch.aot_autograd.aot_function`` on a function
with one of PyTorch's partitioners (or ours, through
:func:`~tutorcompile.aot.partitioners.torch_partition_fn`), runs forward and backward once,
and returns what the partitioner saved plus the forward and backward graphs it made.
:func:`our_partition` does the same with :func:`~tutorcompile.aot.aot_function`.
:func:`saved_bytes_table` puts the four numbers for several functions in one table, all
measured in the same run.

Mirrors: nothing in PyTorch; this is how the course checks its partitioners against theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .aot_autograd import aot_function
from .partitioners import default_partition, min_cut_partition


@dataclass
class PartitionResult:
    saved_bytes: int
    saved_shapes: list
    forward_code: str
    backward_code: str
    forward_ops: int
    backward_ops: int
    grads_match: bool


def _grads(fn: Callable, inputs: list[torch.Tensor], seed: int = 0):
    out = fn(*inputs)
    g = torch.ones_like(out) if out.dim() == 0 else \
        torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    wanted = [x for x in inputs if x.requires_grad]
    return torch.autograd.grad(out, wanted, g)


def _fresh(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]


def _match(a, b, tol: float = 1e-4) -> bool:
    return all(torch.allclose(x, y, atol=tol, rtol=tol) for x, y in zip(a, b))


def pytorch_partition(fn: Callable, inputs: list[torch.Tensor], partition: str = "default"
                      ) -> PartitionResult:
    """PyTorch's own AOTAutograd on ``fn``: ``partition`` is ``"default"``, ``"min_cut"``,
    or a ``partition_fn`` (e.g. ours via ``torch_partition_fn``)."""
    from torch._functorch.aot_autograd import aot_function as torch_aot_function
    from torch._functorch.partitioners import (
        default_partition as torch_default,
    )
    from torch._functorch.partitioners import (
        min_cut_rematerialization_partition as torch_min_cut,
    )
    from torch._inductor.decomposition import select_decomp_table

    base = {"default": torch_default, "min_cut": torch_min_cut}.get(partition, partition)
    found: dict = {}

    def partition_fn(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        fw, bw = base(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)
        outputs = fw.graph.find_nodes(op="output")[0].args[0]
        saved = [n for n in outputs[num_fwd_outputs:]
                 if isinstance(n.meta.get("val"), torch.Tensor)]
        found["saved"] = [(tuple(n.meta["val"].shape), n.meta["val"].nbytes) for n in saved]
        found["fw"], found["bw"] = fw.code.strip(), bw.code.strip()
        count = lambda gm: sum(1 for n in gm.graph.nodes if n.op == "call_function")
        found["fw_ops"], found["bw_ops"] = count(fw), count(bw)
        return fw, bw

    def boxed(gm, _example):
        from torch._functorch.aot_autograd import make_boxed_func
        return make_boxed_func(gm)

    compiled = torch_aot_function(fn, fw_compiler=boxed, bw_compiler=boxed,
                                  partition_fn=partition_fn,
                                  decompositions=select_decomp_table())
    xs = _fresh(inputs)
    ok = _match(_grads(compiled, xs), _grads(fn, _fresh(inputs)))
    return PartitionResult(sum(b for _, b in found["saved"]), [s for s, _ in found["saved"]],
                           found["fw"], found["bw"], found["fw_ops"], found["bw_ops"], ok)


def our_partition(fn: Callable, inputs: list[torch.Tensor],
                  partition: str | Callable = "default") -> PartitionResult:
    """Our AOTAutograd on ``fn`` with ``"default"`` or ``"min_cut"`` (or a partition_fn)."""
    policies: dict[str, Callable] = {"default": default_partition, "min_cut": min_cut_partition}
    if not callable(partition) and partition not in policies:
        raise ValueError(f"partition must be one of {sorted(policies)} or a partition_fn, "
                         f"got {partition!r}")
    policy = partition if callable(partition) else policies[partition]
    compiled = aot_function(fn, partition_fn=policy)
    xs = _fresh(inputs)
    ok = _match(_grads(compiled, xs), _grads(fn, _fresh(inputs)))
    art = compiled.artifacts
    assert art is not None and art.partition is not None   # (a training graph, just run)
    split = art.partition
    report = split.report
    return PartitionResult(report.saved_bytes, [s[1] for s in report.saved],
                           split.forward.code.strip(), split.backward.code.strip(),
                           report.forward_ops, report.backward_ops, ok)


def saved_bytes_table(cases: dict[str, tuple[Callable, list[torch.Tensor]]]) -> str:
    """One row per function: saved bytes, ours default / ours min-cut / PyTorch default /
    PyTorch min-cut, all measured now (and whether every variant's gradients matched)."""
    header = (f"{'function':<34} {'ours default':>14} {'ours min-cut':>14} "
              f"{'torch default':>14} {'torch min-cut':>14}  grads")
    lines = [header, "-" * len(header)]
    for name, (fn, inputs) in cases.items():
        results = [our_partition(fn, inputs, "default"), our_partition(fn, inputs, "min_cut"),
                   pytorch_partition(fn, inputs, "default"),
                   pytorch_partition(fn, inputs, "min_cut")]
        cells = " ".join(f"{r.saved_bytes:>14,}" for r in results)
        ok = "match" if all(r.grads_match for r in results) else "MISMATCH"
        lines.append(f"{name:<34} {cells}  {ok}")
    return "\n".join(lines)
