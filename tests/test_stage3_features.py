"""Issue 39's features, each in a small model of ``benchmarks/features.py``: one graph, right.

Higher-order ops (checkpoint, selective checkpoint, functional_call, vmap, grad, cond,
while_loop, associative_scan, flex_attention), module and tensor hooks, compiled optimizer
steps (with an LR scheduler), ``set_grad_enabled`` regions, seeding, ``itertools``, a
mutating custom op, NumPy on tensors and profiler ranges: each case is captured as one graph
(``torch.compiler.disable`` as two, as in torch.compile), compiles with ``fullgraph=True``
where torch.compile's does, and returns what eager does -- values, the gradients of inputs
and parameters, the state the call changes -- under the eager, aot_eager and inductor
backends. ``python benchmarks/features.py`` prints the same table beside torch.compile's.
"""

import pytest

from benchmarks import features

pytestmark = [pytest.mark.stage3, pytest.mark.usefixtures("fresh_compiler")]

GRAPHS = {
    "torch.compiler.disable": 2,         # the disabled function runs between two graphs
    # PyTorch's BackwardHook wraps the submodule's call: a break around it, its forward a
    # graph of its own, as in torch.compile
    "full backward hook": 2,
}
NOT_FULLGRAPH = {
    "full backward hook",
    "torch.compiler.disable",            # a break by request, in both compilers
}
CASES = [c for c in features.CASES if not c.name.startswith("DistributedDataParallel")]
# (DDP initialises a process group: tests/test_stage3_distributed.py runs it in processes)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_feature_is_one_graph_and_right(case):
    row = features.measure(case, torch_compile=False)
    assert row["tc"].startswith(f"{GRAPHS.get(case.name, 1)}g/"), row
    for backend in features.BACKENDS:
        assert row[backend] == "right", row
    assert row["fullgraph"] == ("no" if case.name in NOT_FULLGRAPH else "yes"), row
