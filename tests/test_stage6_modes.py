"""tutorcompile.compile's mode= and options=, with torch.compile's meaning."""

import pytest
import torch
from torch import nn

import tutorcompile as tc
from tutorcompile.cudagraphs import NO_CUDA, CUDAGraphed
from tutorcompile.dynamo import cache_entries

pytestmark = [pytest.mark.stage6, pytest.mark.usefixtures("fresh_compiler")]


def mlp():
    return nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2)).eval()


@pytest.mark.parametrize("mode", [None, "default", "reduce-overhead", "max-autotune"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_every_mode_computes_what_eager_does(mode, backend, device):
    """(On CUDA, ``reduce-overhead`` records and replays a CUDA Graph; on CPU it skips.)"""
    model, x = mlp().to(device), torch.randn(4, 10, device=device)
    compiled = tc.compile(model, backend=backend, mode=mode)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))


def test_reduce_overhead_wraps_graphs_and_says_why_it_cannot_replay_here():
    model, x = mlp(), torch.randn(4, 10)
    compiled = tc.compile(model, backend="eager", mode="reduce-overhead")
    with torch.no_grad():
        compiled(x)
    (entry,) = cache_entries(model)
    assert isinstance(entry.compiled, CUDAGraphed)
    if not torch.cuda.is_available():
        assert entry.compiled.skips == [NO_CUDA]


def test_graphs_of_different_modes_are_cached_apart():
    model, x = mlp(), torch.randn(4, 10)
    with torch.no_grad():
        tc.compile(model, backend="eager")(x)
        tc.compile(model, backend="eager", mode="reduce-overhead")(x)
    kinds = sorted(type(e.compiled).__name__ for e in cache_entries(model))
    assert kinds == ["CUDAGraphed", "GraphModule"]


def test_bad_mode_and_options_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown mode 'fast'; choose one of: default, "
                                         "reduce-overhead, max-autotune"):
        tc.compile(mlp(), mode="fast")
    with pytest.raises(ValueError, match="backend 'eager' takes no options"):
        tc.compile(mlp(), backend="eager", options={"threads": 2})
    # a misspelt option fails when compile() is called, not at the first call deep inside
    with pytest.raises(ValueError, match="unknown option 'fusoin' for backend 'inductor'; "
                                         "did you mean 'fusion'?"):
        tc.compile(mlp(), options={"fusoin": False})


def test_every_documented_inductor_option_is_accepted():
    model, x = mlp(), torch.randn(4, 10)
    with torch.no_grad():
        expected = model(x)
        for options in ({"fusion": False}, {"codegen": "cpp"}, {"mode": "default"}):
            torch.testing.assert_close(tc.compile(model, options=options)(x), expected,
                                       msg=str(options))


def test_options_reach_a_backend_that_takes_them():
    seen = []

    def backend(gm, example_inputs, options=None):
        seen.append(options)
        return gm

    model, x = mlp(), torch.randn(4, 10)
    with torch.no_grad():
        tc.compile(model, backend=backend, options={"threads": 2})(x)
    assert seen == [{"threads": 2}]


@pytest.mark.gpu
def test_reduce_overhead_replays_inference_and_skips_training_on_gpu():
    model, x = mlp().cuda(), torch.randn(4, 10, device="cuda")
    compiled = tc.compile(model, backend="eager", mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x))
    (entry,) = cache_entries(model)
    assert len(entry.compiled.graphs) == 1 and not entry.compiled.skips
    tc.reset()
    compiled = tc.compile(model, backend="eager", mode="reduce-overhead")
    compiled(x).sum().backward()
    (entry,) = cache_entries(model)
    assert entry.compiled.skips[0].startswith("inputs require grad")
