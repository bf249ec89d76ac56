"""Each stage's knobs live in its ``config.py``, are checked when set, and say why.

The three config modules (``dynamo``, ``aot``, ``inductor``) share the machinery of
``tutorcompile/_config.py``; these tests hold it: a typo or a wrong type fails at once with a
readable message, ``patch`` restores what it set, every knob has its reason, and a knob that
changes the generated code keys the compiled-graph cache.
"""

import ast
import importlib
import inspect

import pytest
import torch

import tutorcompile as tc
from tutorcompile import _config
from tutorcompile.aot import config as aot_config
from tutorcompile.dynamo import config as dynamo_config
from tutorcompile.environment import probe
from tutorcompile.inductor import config as inductor_config
from tutorcompile.ops import ops

pytestmark = pytest.mark.foundation

CONFIGS = [dynamo_config, aot_config, inductor_config]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_every_module_variable_is_a_knob_with_its_reason(config):
    """Nothing tunable hides in a config module without a docstring (then it would be no
    knob: neither checked nor described)."""
    tree = ast.parse(inspect.getsource(config))
    assigned = {s.target.id for s in tree.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    assigned |= {t.id for s in tree.body if isinstance(s, ast.Assign)
                 for t in s.targets if isinstance(t, ast.Name)}
    knobs = _config.knobs_of(config)
    assert assigned == set(knobs)
    for name, (_, doc) in knobs.items():
        assert len(doc.split()) >= 8, f"{config.__name__}.{name}: say why, not only what"
    described = config.describe()
    for name in knobs:
        assert f"{name} = {getattr(config, name)!r}\n" in described


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_a_typo_or_a_wrong_type_fails_when_set(config):
    name, (kind, _) = next((n, k) for n, k in _config.knobs_of(config).items()
                           if k[0] is int)  # (each stage has an int knob)
    before = getattr(config, name)
    with pytest.raises(AttributeError, match=f"did you mean {name!r}"):
        setattr(config, name + "s", 3)
    with pytest.raises(TypeError, match=f"{name} must be an int, got '3'"):
        setattr(config, name, "3")
    with pytest.raises(TypeError, match="must be an int"):
        setattr(config, name, True)   # (a bool is an int to Python, not to a knob)
    with pytest.raises(TypeError):
        config.patch(**{name: 2.5})
    assert getattr(config, name) == before


def test_patch_sets_for_a_block_and_restores_even_on_error():
    before = inductor_config.max_fusion_size
    with pytest.raises(RuntimeError):
        with inductor_config.patch(max_fusion_size=3, cpp_tile=16):
            assert (inductor_config.max_fusion_size, inductor_config.cpp_tile) == (3, 16)
            raise RuntimeError
    assert inductor_config.max_fusion_size == before and inductor_config.cpp_tile == 32
    with pytest.raises(AttributeError):   # checked before anything is set
        inductor_config.patch(max_fusion_size=3, no_such_knob=1)
    assert inductor_config.max_fusion_size == before


def test_a_module_with_an_unknown_knob_type_is_refused(tmp_path, monkeypatch):
    (tmp_path / "fake_config.py").write_text(
        'ratio: list = []\n"""A list is no knob type: it cannot be checked when set."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("fake_config")
    with pytest.raises(TypeError, match="fake_config.ratio: a knob is one of bool, int"):
        _config.knobs_of(module)


def _chain(x):
    for _ in range(6):
        x = ops.sin(ops.mul(x, 2.0))
    return x


@pytest.mark.skipif(not probe().has_cxx, reason="no C++ compiler")
def test_a_knob_keys_the_compiled_graph_cache():
    """The same graph compiled again is a cache hit -- unless a knob changed since: under
    another ``max_fusion_size`` it gets kernels of that size, not the ones made before."""
    from tutorcompile.fx import GraphModule
    from tutorcompile.inductor import inner_compiler
    from tutorcompile.ops import trace

    tc.reset()
    x = torch.randn(64)
    compiler = inner_compiler(codegen="cpp")
    first = compiler(GraphModule({}, trace(_chain, x)), [x])
    assert compiler(GraphModule({}, trace(_chain, x)), [x]).compiled is first.compiled
    with inductor_config.patch(max_fusion_size=2):
        split = compiler(GraphModule({}, trace(_chain, x)), [x])
    assert split.compiled is not first.compiled
    assert first.compiled.fusion_report.kernels_after == 1
    assert split.compiled.fusion_report.kernels_after > 1
    torch.testing.assert_close(split(x), first(x))
