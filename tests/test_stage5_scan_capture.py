"""A scan's ``combine_fn`` reaches code generation as a graph, never as Python to trace.

Capture speculates ``combine_fn`` into a body of its own (a
:class:`~tutorcompile.ops.scan.CombineBody`, which the node still runs eagerly); stage 4
decomposes that body -- or traces a plain Python function, as ``aot_function``'s users hand
it -- into prims and leaves a :class:`~tutorcompile.ops.scan.CombineFn` in the node; stage 5
only spells the graph it is given, and says why when it was given none
(``tests/test_layering.py`` holds that nothing under ``inductor/`` can trace).
"""

import pytest
import torch

import tutorcompile as tc
from tutorcompile.aot.prim_graph import decompose
from tutorcompile.dynamo import eval_frame
from tutorcompile.fx import Graph, GraphModule
from tutorcompile.inductor.lowering import lower_graph
from tutorcompile.ops import Prim
from tutorcompile.ops.scan import CombineBody, CombineFn, sequential_scan

pytestmark = [pytest.mark.stage5, pytest.mark.usefixtures("fresh_compiler")]


def _decaying(left, right):
    return left[0] * right[0], right[0] * left[1] + right[1]


def _scan_graph(combine, packed=True) -> Graph:
    graph = Graph()
    xs = (graph.placeholder("a"), graph.placeholder("x")) if packed else graph.placeholder("x")
    graph.output(graph.call_function(sequential_scan, (combine, xs), {"dim": 1}))
    return graph


def test_stage4_decomposes_a_python_combine_fn_into_prims():
    """A Python function reaching AOT without capture is traced there, once, for the
    leaves' dtype; the node runs it as before and carries its prims."""
    a, x = torch.rand(2, 6, dtype=torch.float64), torch.randn(2, 6, dtype=torch.float64)
    prims, report = decompose(_scan_graph(_decaying), [a, x])
    (node,) = [n for n in prims.nodes if n.target is sequential_scan]
    combine = node.args[0]
    assert isinstance(combine, CombineFn) and combine.fn is _decaying
    assert combine.dtypes == (torch.float64, torch.float64)
    assert isinstance(combine.prims, Graph)
    assert {n.target.name for n in combine.prims.nodes if n.op == "call_function"
            if isinstance(n.target, Prim)} == {"mul", "add"}
    torch.testing.assert_close(GraphModule({}, prims)(a, x), sequential_scan(_decaying,
                                                                            (a, x), 1))
    lowering = lower_graph(prims, [a, x], "cpp")
    assert not [f for f in lowering.fallbacks if "sequential_scan" in f], lowering.fallbacks


def test_a_combine_fn_stage4_could_not_capture_keeps_pytorchs_loop_and_says_why():
    """Stage 5 no longer traces: a node whose function was never captured (or whose
    capture failed) is PyTorch's loop, with the reason in the fallbacks."""
    x = torch.randn(3, 5)
    prims, _ = decompose(_scan_graph(torch.add, packed=False), [x])
    (node,) = [n for n in prims.nodes if n.target is sequential_scan]
    node.args = (node.args[0].fn, *node.args[1:])    # as if no stage 4 had run
    why = [f for f in lower_graph(prims, [x], "cpp").fallbacks if "sequential_scan" in f]
    assert len(why) == 1 and "combine_fn was not captured as prims" in why[0], why

    def untraceable(acc, cur):   # (slices of 3 elements, but stage 4 traces on one)
        return acc + cur.view(-1, 3)[0]
    prims, _ = decompose(_scan_graph(untraceable, packed=False), [x])
    (node,) = [n for n in prims.nodes if n.target is sequential_scan]
    assert isinstance(node.args[0].prims, str)
    why = [f for f in lower_graph(prims, [x], "cpp").fallbacks if "sequential_scan" in f]
    assert len(why) == 1 and node.args[0].prims in why[0], why


def decaying_sum(x):
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine_fn(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]
    return associative_scan(combine_fn, (torch.sigmoid(x), x), dim=1,
                            combine_mode="generic")[1]


def test_capture_speculates_combine_fn_into_a_body():
    """Over a symbolic length the graph's one ``sequential_scan`` node holds
    ``combine_fn``'s body -- a graph of torch calls over one slice of each leaf, the
    accumulated ones then the current ones -- which runs eagerly as the function did."""
    compiled = tc.compile(decaying_sum, backend="eager", dynamic=True, fullgraph=True)
    for t in (5, 8):
        x = torch.randn(2, t, 3)
        torch.testing.assert_close(compiled(x), decaying_sum(x))
    (entry,) = eval_frame.cache_entries(decaying_sum)
    (node,) = [n for n in entry.graph_module.graph.nodes if n.target is sequential_scan]
    combine = node.args[0]
    assert isinstance(combine, CombineBody) and isinstance(combine.body, GraphModule)
    assert combine.__name__ == "combine_fn"
    assert len(combine.body.graph.placeholders) == 4
    assert [n.target for n in combine.body.graph.nodes if n.op == "call_function"] == \
        [torch.mul, torch.mul, torch.add] or "mul" in combine.body.code
