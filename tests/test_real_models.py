"""Real-world capture: tiny random-config Hugging Face ``transformers`` models, built locally
(no download), through ``tutorcompile.compile`` under every backend of the ladder.

Each model has 2 layers, hidden size 64, and runs on input ids of shape 2x16, with the
attention implementation a user gets by default (``sdpa``). Checked against eager PyTorch:

* inference: ``last_hidden_state`` matches;
* one training step: the loss's gradients with respect to every parameter match;
* capture: ``tc.explain`` counts graphs and breaks. ``torch.compile`` captures each model
  as 1 graph with 0 breaks; where we do not yet, the test is an expected failure
  (``strict=True``), so the list can only shrink.
"""

import pytest
import torch

import tutorcompile as tc
from tutorcompile.dynamo import eval_frame

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.stage3

VOCAB = 1000


def _configs():
    t = transformers
    small = dict(vocab_size=VOCAB)
    return {
        "gpt2": lambda: t.GPT2Model(t.GPT2Config(
            n_layer=2, n_embd=64, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0,
            **small)),
        "bert": lambda: t.BertModel(t.BertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=64, **small)),
        "llama": lambda: t.LlamaModel(t.LlamaConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, max_position_embeddings=64, **small)),
        "mistral": lambda: t.MistralModel(t.MistralConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, max_position_embeddings=64, **small)),
        "distilbert": lambda: t.DistilBertModel(t.DistilBertConfig(
            n_layers=2, dim=64, n_heads=4, hidden_dim=128, max_position_embeddings=64,
            **small)),
        "opt": lambda: t.OPTModel(t.OPTConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, ffn_dim=128,
            max_position_embeddings=64, word_embed_proj_dim=64, **small)),
        "t5": lambda: t.T5EncoderModel(t.T5Config(
            num_layers=2, d_model=64, num_heads=4, d_kv=16, d_ff=128, **small)),
    }


MODELS = list(_configs())
# inductor compiles C++ kernels for forward and backward: ~10-30 s per model on 2 cores
BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]

# Models we do not yet capture as one graph: the reason is the top remaining break.
NOT_ONE_GRAPH: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _fresh():
    eval_frame.reset()
    yield
    eval_frame.reset()


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = _configs()[name]()
    return model.eval()  # dropout off: eager and compiled runs draw no random numbers


def input_ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MODELS)
def test_inference_matches_eager(name, backend):
    model, ids = build(name), input_ids()
    with torch.no_grad():
        want = model(ids).last_hidden_state
        got = tc.compile(model, backend=backend)(ids).last_hidden_state
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", MODELS)
def test_training_step_gradients_match_eager(name, backend):
    model, ids = build(name), input_ids()
    model(ids).last_hidden_state.pow(2).mean().backward()
    # a parameter the loss does not reach (BERT's pooler) has no gradient in eager; a
    # compiled graph computes all its outputs in one autograd node and gives it zeros
    # (torch.compile does the same): compare as zeros
    want = {k: _grad(p).clone() for k, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    tc.compile(model, backend=backend)(ids).last_hidden_state.pow(2).mean().backward()
    assert any(p.grad is not None for p in model.parameters())
    for k, p in model.named_parameters():
        torch.testing.assert_close(_grad(p), want[k], rtol=1e-4, atol=1e-5, msg=k)


def _grad(p: torch.Tensor) -> torch.Tensor:
    return p.grad if p.grad is not None else torch.zeros_like(p)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=NOT_ONE_GRAPH[n]))
    if n in NOT_ONE_GRAPH else n for n in MODELS])
def test_captured_as_one_graph(name):
    model, ids = build(name), input_ids()
    out = tc.explain(model)(ids)
    assert (out.graph_count, out.graph_break_count) == (1, 0), str(out)
