"""Stage 5, compile time of many graphs: a kernel built once however many graphs have it, a
graph's kernels built together in few compiler runs, a graph compiled once however often
it recurs, and a backward that runs through PyTorch while its kernels build.

Assertions count builds, compiler runs and reuses (``codecache.stats``), never seconds;
``benchmarks/compile_time.py --model unet`` measures the time."""

import importlib

import pytest
import torch

from tutorcompile.aot import aot_module
from tutorcompile.environment import probe
from tutorcompile.fx import Graph, GraphModule
from tutorcompile.inductor import codecache
from tutorcompile.inductor.compile_fx import BUILDS, LazyCompiledGraph, compile_fx, inner_compiler
from tutorcompile.ops import PRIMS, ops, trace

pytestmark = [pytest.mark.stage5,
              pytest.mark.skipif(not probe().has_cxx, reason="no C++ compiler")]
compile_fx_module = importlib.import_module("tutorcompile.inductor.compile_fx")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty disk cache, nothing loaded in this process, counters from zero -- after the
    builds an earlier test left running in the background (a lazily compiled backward's
    kernels) have finished: counted after the reset, they were this test's (in CI, one
    such build in the same worker made 3 compiles of 2)."""
    if codecache._pool is not None:
        codecache._pool.shutdown(wait=True)
        codecache._pool = None     # the next build starts a new pool
    monkeypatch.setenv("TUTORCOMPILE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(codecache, "_loaded", {})
    monkeypatch.setattr(codecache, "stats", dict.fromkeys(codecache.stats, 0))
    return tmp_path


def sigmoid_head(x, w):
    return ops.mul(ops.sigmoid(ops.matmul(ops.relu(ops.add(x, 1.0)), w)), 2.0)


def tanh_head(x, w):
    return ops.tanh(ops.matmul(ops.relu(ops.add(x, 1.0)), w))


def test_a_kernel_two_graphs_share_is_built_once(fresh_cache):
    """``relu(x + 1)`` is a kernel of both graphs (a matmul ends it): the second graph
    builds only its own head, and both match eager."""
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    first = compile_fx(trace(sigmoid_head, x, w), [x, w], codegen="cpp")
    assert (codecache.stats["cpp_compiles"], codecache.stats["cpp_hits"]) == (2, 0)
    second = compile_fx(trace(tanh_head, x, w), [x, w], codegen="cpp")
    assert (codecache.stats["cpp_compiles"], codecache.stats["cpp_hits"]) == (3, 1)
    torch.testing.assert_close(first(x, w), torch.sigmoid(torch.relu(x + 1) @ w) * 2)
    torch.testing.assert_close(second(x, w), torch.tanh(torch.relu(x + 1) @ w))


def test_a_graphs_kernels_share_one_compiler_run(fresh_cache):
    """Three kernels (matmuls between them), one compiler run; each kernel still has its
    own cache entry, and a new process (nothing loaded) finds all three on disk."""
    def three_kernels(x, w):
        h = ops.matmul(ops.relu(ops.add(x, 1.0)), w)
        return ops.exp(ops.matmul(ops.sigmoid(h), w))
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    graph = trace(three_kernels, x, w)
    compiled = compile_fx(graph, [x, w], codegen="cpp")
    assert compiled.num_kernels == 3
    assert (codecache.stats["cpp_compiles"], codecache.stats["cpp_runs"]) == (3, 1)
    assert len(list(fresh_cache.glob("cpp/*/kernel.so"))) == 3
    codecache._loaded.clear()
    again = compile_fx(graph, [x, w], codegen="cpp")
    assert (codecache.stats["cpp_runs"], codecache.stats["cpp_hits"]) == (1, 3)
    expected = torch.exp(torch.sigmoid(torch.relu(x + 1) @ w) @ w)
    torch.testing.assert_close(compiled(x, w), expected)
    torch.testing.assert_close(again(x, w), expected)


def test_a_failed_build_fails_every_kernel_of_its_run(fresh_cache):
    """A kernel that does not compile takes its run down with it: each kernel of the run
    raises the compiler's message when it is waited for."""
    with codecache.batched_builds():
        good = codecache.cpp_kernel_async('extern "C" int kernel() { return 1; }')
        bad = codecache.cpp_kernel_async('extern "C" int kernel() { return nope; }')
    for future in (good, bad):
        with pytest.raises(RuntimeError, match="C\\+\\+ compilation failed"):
            future.result()


def test_waiting_for_a_queued_kernel_sends_its_batch(fresh_cache):
    """Autotuning times a kernel while its graph is still being generated: asking for a
    kernel of a batch not yet sent sends it (no deadlock)."""
    with codecache.batched_builds():
        future = codecache.cpp_kernel_async('extern "C" int kernel() { return 7; }')
        assert future.result()() == 7


def renamed(fn, *names):
    """The prim graph of ``fn`` with its inputs called ``names``: another graph, computing
    the same thing."""
    return GraphModule({}, trace(fn, torch.randn(4, 8), torch.randn(8, 8), names=names))


def test_the_same_graph_under_other_names_is_compiled_once(fresh_cache):
    """Graphs that differ only in their node names share one compilation (the backend
    path: what Dynamo and AOT hand over); other inputs' layouts, other constants or other
    options compile again."""
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    compiler = inner_compiler(codegen="cpp")
    first = compiler(renamed(sigmoid_head, "x", "w"), [x, w])
    second = compiler(renamed(sigmoid_head, "hidden", "weight"), [x, w])
    assert second.compiled is first.compiled and codecache.stats["graph_hits"] == 1
    torch.testing.assert_close(second(x, w), torch.sigmoid(torch.relu(x + 1) @ w) * 2)

    x_t = torch.randn(8, 4).t()
    assert compiler(renamed(sigmoid_head, "x", "w"), [x_t, w]).compiled is not first.compiled
    assert compiler(renamed(tanh_head, "x", "w"), [x, w]).compiled is not first.compiled
    unfused = inner_compiler(codegen="cpp", fusion=False)(renamed(sigmoid_head, "x", "w"),
                                                          [x, w])
    assert unfused.compiled is not first.compiled
    assert codecache.stats["graph_hits"] == 1


def test_graph_key_reads_constants_by_value():
    """A scalar constant and a tensor constant are part of the key, by value."""
    def scaled(c):
        graph = Graph()
        x = graph.placeholder("x")
        graph.output(graph.call_function(PRIMS["mul"], (x, c)))
        return graph
    x = torch.randn(3)
    key = codecache.graph_key
    assert key(scaled(2.0), [x], ()) == key(scaled(2.0), [x], ())
    assert key(scaled(2.0), [x], ()) != key(scaled(3.0), [x], ())
    assert key(scaled(torch.ones(3)), [x], ()) == key(scaled(torch.ones(3)), [x], ())
    assert key(scaled(torch.ones(3)), [x], ()) != key(scaled(torch.zeros(3)), [x], ())
    assert key(scaled(2.0), [x], ()) != key(scaled(2.0), [x], ("triton",))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x) * 2)))


def test_a_backward_runs_through_pytorch_while_its_kernels_build(fresh_cache, monkeypatch):
    """The backward is compiled at the first backward; while its kernels build (held back
    here until the step is over) that call runs the backward graph through PyTorch's ops.
    Gradients match eager's on that step and on the next, which runs the kernels."""
    deferred, held = BUILDS.index("deferred"), []
    start = codecache._start
    monkeypatch.setattr(codecache, "_start", lambda job, priority=0: held.append(job)
                        if priority == deferred else start(job, priority))
    eager_runs = []
    eager_compiler = compile_fx_module.eager_compiler
    monkeypatch.setattr(compile_fx_module, "eager_compiler",
                        lambda gm: eager_runs.append(gm) or eager_compiler(gm))
    torch.manual_seed(0)
    model, x = MLP(), torch.randn(4, 8)
    model(x).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    compiler = inner_compiler(codegen="cpp")
    compiled = aot_module(model, fw_compiler=compiler, bw_compiler=compiler)
    for step in range(2):
        model.zero_grad()
        compiled(x).sum().backward()
        for p, g in zip(model.parameters(), expected):
            torch.testing.assert_close(p.grad, g)
        assert len(eager_runs) == 1 and (len(held) > 0) == (step == 0)
        for job in held:            # the builds go ahead; the next step waits for them
            start(job)
        held.clear()
    backward = compiled.artifacts.backward
    assert isinstance(backward, LazyCompiledGraph) and not backward.compiled.building


def test_a_backward_that_draws_random_numbers_waits_for_its_kernels(fresh_cache,
                                                                   monkeypatch):
    """A graph that draws random numbers is not run through PyTorch while its kernels
    build: the kernels would draw other numbers on the next call."""
    eager_runs = []
    monkeypatch.setattr(compile_fx_module, "eager_compiler",
                        lambda gm: eager_runs.append(gm))
    graph = Graph()
    x = graph.placeholder("x")
    noise = graph.call_function(torch.rand_like, (x,))
    graph.output(graph.call_function(PRIMS["add"], (graph.call_function(
        PRIMS["mul"], (noise, 0.0)), x)))
    lazy = LazyCompiledGraph(GraphModule({}, graph), codegen="cpp")
    x = torch.randn(5)
    torch.testing.assert_close(lazy(x), x)
    assert eager_runs == [] and not lazy.compiled.building
