"""CUDA Graphs: record once, replay with static buffers; skip with a reason otherwise.

The record/replay tests need a GPU (marked ``gpu``); the skip reasons are checked everywhere.
"""

import pytest
import torch

from tutorcompile import _logging as logs
from tutorcompile.cudagraphs import NO_CUDA, CUDAGraphed, cudagraphify, skip_reason

pytestmark = pytest.mark.stage6
HAS_CUDA = torch.cuda.is_available()


def tiny_mlp_step(x, w1, w2):
    return torch.relu(x @ w1).sin() @ w2 + 1.0


def test_cpu_tensors_are_skipped_with_a_reason_and_still_computed(capsys):
    logs.set_logs(cudagraphs=True)
    try:
        graphed = cudagraphify(tiny_mlp_step)
        args = [torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 2)]
        torch.testing.assert_close(graphed(*args), tiny_mlp_step(*args))
        graphed(*args)
    finally:
        logs.set_logs()
    expected = NO_CUDA if not HAS_CUDA else "inputs [0, 1, 2] are CPU tensors"
    assert graphed.skips and graphed.skips[0].startswith(expected)
    assert len(graphed.skips) == 1 and graphed.graphs == {}
    assert capsys.readouterr().out.count("[tutorcompile:cudagraphs] tiny_mlp_step: skipped") == 1
    assert "skipped:" in graphed.summary()


@pytest.mark.skipif(not HAS_CUDA, reason="the other skip reasons are checked after the device")
def test_every_skip_reason_names_its_cause():
    x = torch.randn(2, device="cuda")
    assert skip_reason([x]) is None
    assert "mutates its inputs" in skip_reason([x], mutates_inputs=True)
    assert "dynamic shapes" in skip_reason([x], dynamic=True)
    assert "item" in skip_reason([x], unsupported_ops=["aten.item"])
    assert "no tensor inputs" in skip_reason([3])


def test_no_cuda_reason_says_what_is_missing():
    if HAS_CUDA:
        pytest.skip("this machine has a GPU")
    assert skip_reason([torch.ones(1)]) == NO_CUDA
    assert "CUDA device" in NO_CUDA


@pytest.mark.gpu
def test_record_then_replay_matches_eager_and_reuses_static_outputs():
    args = [torch.randn(16, 32, device="cuda"), torch.randn(32, 32, device="cuda"),
            torch.randn(32, 4, device="cuda")]
    graphed = CUDAGraphed(tiny_mlp_step, name="mlp")
    first = graphed(*args)
    torch.testing.assert_close(first, tiny_mlp_step(*args))
    new = [torch.randn_like(a) for a in args]
    second = graphed(*new)
    torch.testing.assert_close(second, tiny_mlp_step(*new))
    assert second.data_ptr() == first.data_ptr()   # static output, overwritten by the replay
    assert len(graphed.graphs) == 1 and next(iter(graphed.graphs.values())).replays == 2


@pytest.mark.gpu
def test_one_graph_per_shape_and_clone_outputs():
    graphed = CUDAGraphed(torch.sin, clone_outputs=True)
    a, b = torch.randn(8, device="cuda"), torch.randn(16, device="cuda")
    out_a = graphed(a)
    graphed(b)
    out_a2 = graphed(a * 2)
    assert len(graphed.graphs) == 2
    assert out_a.data_ptr() != out_a2.data_ptr()   # clones survive later replays
    torch.testing.assert_close(out_a, torch.sin(a))


@pytest.mark.gpu
def test_capture_failure_falls_back_with_a_reason():
    def syncs(x):
        return x * x.sum().item()   # .item() synchronises: not capturable

    graphed = CUDAGraphed(syncs)
    x = torch.randn(4, device="cuda")
    torch.testing.assert_close(graphed(x), syncs(x))
    assert graphed.skips and graphed.skips[0].startswith("capture failed")


@pytest.mark.gpu
def test_capture_failure_leaves_no_state_behind():
    """After a failed capture: random numbers work outside a capture (the generator left
    capture mode), work runs on the stream it ran on before, and a later capture of a
    function that draws random numbers records and replays."""
    def syncs(x):
        return x * x.sum().item()

    stream = torch.cuda.current_stream()
    CUDAGraphed(syncs)(torch.randn(4, device="cuda"))
    assert torch.cuda.current_stream() == stream
    assert torch.rand(3, device="cuda").shape == (3,)   # raised "Offset increment ..."

    def noisy(x):
        return torch.nn.functional.dropout(x, 0.5, training=True)

    graphed = CUDAGraphed(noisy)
    x = torch.ones(1000, device="cuda")
    first, second = graphed(x).clone(), graphed(x).clone()
    assert len(graphed.graphs) == 1 and not graphed.skips
    assert set(first.unique().tolist()) <= {0.0, 2.0}
    assert not torch.equal(first, second)                 # each replay draws a new mask


def test_cpu_stand_in_has_a_cuda_graphs_contract():
    from tutorcompile.cudagraphs import RecordedGraph, record_on_cpu
    static = [torch.randn(3, 4), torch.randn(4, 2)]
    entry = RecordedGraph(record_on_cpu(torch.mm, static), static)
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    out = entry.replay([a, b])
    torch.testing.assert_close(out, a @ b)
    out2 = entry.replay([a * 2, b])
    assert out2 is out                         # same buffer, overwritten by the replay
    torch.testing.assert_close(out, (a * 2) @ b)
    assert static[0].data_ptr() == entry.static_inputs[0].data_ptr()


def test_parameters_are_read_in_place_and_never_copied(monkeypatch):
    """Replays copy a call's activations into the recording's static buffers, but read the
    parameters where they live: an in-place update (an optimizer step) reaches the next
    replay with no copy, and a different tensor in a parameter's place records a new graph
    instead of writing over the old parameter. (Recorded with the CPU stand-in, which has a
    CUDA Graph's contract, so the bookkeeping runs on any machine.)"""
    import tutorcompile.cudagraphs as cg
    from tutorcompile.cudagraphs import record_on_cpu
    monkeypatch.setattr(cg, "skip_reason", lambda args, **kw: None)
    monkeypatch.setattr(cg, "record_cuda_graph",
                        lambda fn, static, warmup, pool: record_on_cpu(fn, static))
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    w1 = torch.nn.Parameter(torch.randn(8, 8), requires_grad=False)
    w2 = torch.nn.Parameter(torch.randn(8, 2), requires_grad=False)
    graphed = CUDAGraphed(tiny_mlp_step, name="mlp")
    x = torch.randn(4, 8)
    torch.testing.assert_close(graphed(x, w1, w2), tiny_mlp_step(x, w1, w2))
    (entry,) = graphed.graphs.values()
    assert entry.static_inputs[1] is w1 and entry.static_inputs[2] is w2
    assert entry.static_inputs[0] is not x            # an activation: a static copy
    with torch.no_grad():
        w1.mul_(0.5)                                  # an optimizer step, in place
    x2 = torch.randn(4, 8)
    torch.testing.assert_close(graphed(x2, w1, w2), tiny_mlp_step(x2, w1, w2))
    assert entry.copies == 2                          # x and x2, never a parameter
    other = torch.nn.Parameter(torch.randn(8, 8), requires_grad=False)
    torch.testing.assert_close(graphed(x2, other, w2), tiny_mlp_step(x2, other, w2))
    assert len(graphed.graphs) == 2 and entry.static_inputs[1] is w1
    assert "2 replays, 2 input copies" in graphed.summary()
