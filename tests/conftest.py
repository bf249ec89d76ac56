"""Shared test setup.

* Triton runs under its CPU interpreter when there is no GPU (must be set before triton is
  imported anywhere, hence here).
* ``device`` parametrises a test over CPU and, when present, CUDA -- write a test once, run
  it on every device (the ``CommonTemplate`` idea of early TorchInductor's tests).
* Tests marked ``gpu`` are skipped cleanly without CUDA.
* torchvision (and through it ``transformers`` and ``timm``) is made importable with the CPU
  build of torch before any test imports it (see ``make_torchvision_importable``).
"""

import os

import pytest
import torch

from tutorcompile.environment import make_torchvision_importable

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

make_torchvision_importable()

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible to torch)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=[pytest.param(d, marks=[pytest.mark.gpu] if d == "cuda" else [])
                        for d in ["cpu", "cuda"]])
def device(request):
    """Run the test on CPU, and again on CUDA when a GPU is present."""
    return request.param


@pytest.fixture
def fresh_compiler():
    """No compiled graph, guard, dynamic mark or recompile log before or after the test
    (``tutorcompile.reset()``). Test files that compile ask for it for every test:
    ``pytestmark = pytest.mark.usefixtures("fresh_compiler")``."""
    from tutorcompile.dynamo.eval_frame import reset
    reset()
    yield
    reset()


@pytest.fixture
def fresh_torch_dynamo():
    """The same for real Dynamo (``torch._dynamo.reset()``), for test files that compile
    with ``torch.compile``: ``pytestmark = pytest.mark.usefixtures("fresh_torch_dynamo")``."""
    import torch._dynamo
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _distributions_keep_validating():
    """Eager ``flex_attention`` (the reference of the flex tests) turns off torch.distributions'
    argument validation for the rest of the process; a test after it in the same worker
    would see a validation that never raises. Put it back after every test."""
    before = torch.distributions.Distribution._validate_args
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


def pytest_terminal_summary(terminalreporter):
    """The OpInfo sweep's counts per backend (forward right, kernels, gradients right)."""
    from tests.opinfo_sweep import summary_lines
    reports = [r for v in terminalreporter.stats.values() for r in v if hasattr(r, "when")]
    lines = summary_lines(reports)
    if lines:
        terminalreporter.section("OpInfo sweep")
        for line in lines:
            terminalreporter.write_line(line)
