"""torch.compile(model, backend="tutorcompile"): real Dynamo in front of our compiler."""

import pytest
import torch
import torch._dynamo
from torch import nn

from tutorcompile import torch_backend

pytestmark = [pytest.mark.stage6, pytest.mark.usefixtures("fresh_torch_dynamo")]


def seed_model():
    return nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2), nn.Softmax(dim=1))


def test_name_is_found_through_the_entry_point():
    from torch._dynamo.backends.registry import list_backends, lookup_backend
    assert "tutorcompile" in list_backends(exclude_tags=())
    assert lookup_backend("tutorcompile") is torch_backend.tutorcompile_backend


def test_training_step_matches_eager():
    torch.manual_seed(0)
    model, x = seed_model(), torch.randn(4, 10)
    compiled = torch.compile(model, backend="tutorcompile")
    out = compiled(x)
    grads = torch.autograd.grad(out.square().sum(), list(model.parameters()))
    expected = model(x)
    expected_grads = torch.autograd.grad(expected.square().sum(), list(model.parameters()))
    torch.testing.assert_close(out, expected)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g, e)


def test_explicit_registration_is_idempotent():
    assert torch_backend.register() == "tutorcompile"
    assert torch_backend.register() == "tutorcompile"


def test_our_graph_is_what_torch_dynamo_captured():
    seen = []

    def spy(gm, example_inputs):
        seen.append(gm)
        return torch_backend.tutorcompile_backend(gm, example_inputs)

    fn = torch.compile(lambda x: torch.sin(x) * 2, backend=spy)
    torch.testing.assert_close(fn(torch.ones(3)), torch.sin(torch.ones(3)) * 2)
    assert len(seen) == 1
