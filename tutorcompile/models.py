"""The course's capstone models, small enough for a laptop CPU and written out in full.

* :class:`GPT` -- a decoder-only transformer in the style of nanoGPT: token and position
  embeddings, pre-norm blocks of causal self-attention and a GELU MLP, a tied-free head.
* :class:`AlexNet` -- the seed's AlexNet layout (five convolutions with ReLU, three max
  pools, dropout and three linear layers) for 32×32 images, or 224×224 ones
  (``image_size=224``).
* :class:`MLP` -- the seed's ``Linear → ReLU → Linear → Softmax`` generalised to any widths.

Beside them, models nobody here wrote: :func:`hf_model` builds tiny random-config Hugging Face
``transformers`` models (GPT-2, BERT, Llama, Mistral, DistilBERT, OPT, T5 encoder; 2 layers,
hidden size 64) from their config classes, and :func:`hf_input_ids` their 2×16 input ids --
the one place the real-model tests and ``benchmarks/real_models.py`` build them.

All weights are random (``torch.manual_seed`` makes them repeatable); nothing is downloaded.
Each capstone model has ``example_inputs(batch)`` and ``loss(output, target_batch)`` so the capstone
notebook, the tests and the benchmarks can run inference and a training step the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .environment import make_torchvision_importable


@dataclass
class GPTConfig:
    vocab_size: int = 128
    block_size: int = 32
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    mask: torch.Tensor   # a buffer: the causal mask

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0, "n_embd must be divisible by n_head"
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size))
        self.register_buffer("mask", mask.view(1, 1, cfg.block_size, cfg.block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.fc_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.drop(self.fc_proj(F.gelu(self.fc(self.ln_2(x)))))


class GPT(nn.Module):
    """A small GPT: ``logits = GPT()(token_ids)`` with ``token_ids`` of shape (batch, time)."""

    def __init__(self, cfg: GPTConfig | None = None):
        super().__init__()
        self.cfg = cfg = cfg or GPTConfig()
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def example_inputs(self, batch: int = 4) -> tuple[torch.Tensor]:
        return (torch.randint(0, self.cfg.vocab_size, (batch, self.cfg.block_size)),)

    def targets(self, batch: int = 4) -> torch.Tensor:
        return torch.randint(0, self.cfg.vocab_size, (batch, self.cfg.block_size))

    @staticmethod
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


class AlexNet(nn.Module):
    """AlexNet's layout (5 conv + 3 pool + 3 linear, with dropout) for square RGB images.

    ``image_size`` is 32 by default (CIFAR-sized, as in the seed); 224 is the classic
    ImageNet benchmark size. Three 2× max pools leave ``image_size // 8`` pixels a side, so
    the first linear layer takes ``2 * width * (image_size // 8) ** 2`` features; the
    size must be a multiple of 8. (The convolutions stay the seed's 3×3, stride 1, so at
    224 this is not torchvision's 11×11-stride-4 ``alexnet``: with ``width=16`` it does
    about 0.31 G multiply-adds per image, against its 0.71 G.)
    """

    def __init__(self, num_classes: int = 10, width: int = 16, dropout: float = 0.5,
                 image_size: int = 32):
        super().__init__()
        if image_size % 8:
            raise ValueError(f"AlexNet needs an image size that is a multiple of 8 "
                             f"(three 2× max pools), got {image_size}")
        w, side = width, image_size // 8
        self.features = nn.Sequential(
            nn.Conv2d(3, w, kernel_size=3, stride=1, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(w, 2 * w, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(2 * w, 4 * w, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(4 * w, 4 * w, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(4 * w, 2 * w, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(2 * w * side * side, 8 * w), nn.ReLU(inplace=True),
            nn.Dropout(dropout), nn.Linear(8 * w, 8 * w), nn.ReLU(inplace=True),
            nn.Linear(8 * w, num_classes),
        )
        self.num_classes = num_classes
        self.image_size = image_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))

    def example_inputs(self, batch: int = 4) -> tuple[torch.Tensor]:
        return (torch.randn(batch, 3, self.image_size, self.image_size),)

    def targets(self, batch: int = 4) -> torch.Tensor:
        return torch.randint(0, self.num_classes, (batch,))

    @staticmethod
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


class MLP(nn.Module):
    """``Linear → ReLU → ... → Linear → Softmax``; ``MLP()`` is the seed's 10→5→2 model."""

    def __init__(self, sizes: tuple[int, ...] = (10, 5, 2), softmax: bool = True):
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        if softmax:
            layers.append(nn.Softmax(dim=1))
        self.net = nn.Sequential(*layers)
        self.sizes = sizes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def example_inputs(self, batch: int = 4) -> tuple[torch.Tensor]:
        return (torch.randn(batch, self.sizes[0]),)

    def targets(self, batch: int = 4) -> torch.Tensor:
        return torch.randn(batch, self.sizes[-1]).softmax(dim=1)

    @staticmethod
    def loss(output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(output, targets)


# --- tiny Hugging Face models ----------------------------------------------------------------
HF_VOCAB = 1000
HF_MODELS = ("gpt2", "bert", "llama", "mistral", "distilbert", "opt", "t5")
# More architectures, each with something the seven above do not have: a ModelOutput indexed
# by position (ALBERT, MPNet, DeBERTa-v2), an autograd.Function and ALiBi (BLOOM), a
# functools.partial activation (Gemma, Starcoder2), a mixture of experts behind a decorated
# forward (Mixtral), partial rotary embeddings (Phi, GPT-NeoX), biased q/k/v (Qwen2).
HF_MORE_MODELS = ("albert", "bloom", "deberta-v2", "gemma", "gpt_neox", "mixtral", "mpnet",
                  "phi", "qwen2", "starcoder2",
                  # and: a cache built from a deep copy of the config, through strict-dataclass
                  # validators (BART); stateless modules built in forward (CANINE); a buffer
                  # rebound in forward (CTRL); ``self.dtype`` walking ``parameters()`` (XLNet);
                  # ``nn.LayerNorm.forward(self, x)`` (SqueezeBERT); ``getattr(None, ...,
                  # default)`` (MPT); an associative scan over a Python function (Mamba)
                  "bart", "canine", "ctrl", "xlnet", "squeezebert", "mpt", "mamba")


def _hf_configs(t) -> dict:
    small = dict(vocab_size=HF_VOCAB)
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
        "albert": lambda: t.AlbertModel(t.AlbertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            embedding_size=32, max_position_embeddings=64, **small)),
        "bloom": lambda: t.BloomModel(t.BloomConfig(n_layer=2, hidden_size=64, n_head=4,
                                                    **small)),
        "deberta-v2": lambda: t.DebertaV2Model(t.DebertaV2Config(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=64, **small)),
        "gemma": lambda: t.GemmaModel(t.GemmaConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, intermediate_size=128, max_position_embeddings=64, **small)),
        "gpt_neox": lambda: t.GPTNeoXModel(t.GPTNeoXConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=64, **small)),
        "mixtral": lambda: t.MixtralModel(t.MixtralConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, num_local_experts=4, num_experts_per_tok=2,
            max_position_embeddings=64, **small)),
        "mpnet": lambda: t.MPNetModel(t.MPNetConfig(   # (positions start after the pad id)
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=66, **small)),
        "phi": lambda: t.PhiModel(t.PhiConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=64, **small)),
        "qwen2": lambda: t.Qwen2Model(t.Qwen2Config(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, max_position_embeddings=64, **small)),
        "starcoder2": lambda: t.Starcoder2Model(t.Starcoder2Config(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, max_position_embeddings=64, bos_token_id=0,
            eos_token_id=0, **small)),
        "bart": lambda: t.BartModel(t.BartConfig(
            encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
            max_position_embeddings=64, **small)),
        "canine": lambda: t.CanineModel(t.CanineConfig(  # no vocabulary: hashed code points
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=64)),
        "ctrl": lambda: t.CTRLModel(t.CTRLConfig(n_layer=2, n_embd=64, n_head=4, dff=128,
                                                 n_positions=64, **small)),
        "xlnet": lambda: t.XLNetModel(t.XLNetConfig(n_layer=2, d_model=64, n_head=4,
                                                    d_inner=128, **small)),
        "squeezebert": lambda: t.SqueezeBertModel(t.SqueezeBertConfig(
            num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
            embedding_size=64, max_position_embeddings=64, **small)),
        "mpt": lambda: t.MptModel(t.MptConfig(n_layers=2, d_model=64, n_heads=4, max_seq_len=64,
                                              **small)),
        "mamba": lambda: t.MambaModel(t.MambaConfig(num_hidden_layers=2, hidden_size=64,
                                                    state_size=8, **small)),
    }


def hf_model(name: str, seed: int = 0) -> nn.Module:
    """The tiny random-config ``transformers`` model ``name`` (of :data:`HF_MODELS` or
    :data:`HF_MORE_MODELS`), in eval mode (dropout off, so eager and compiled runs draw no
    random numbers), with the attention implementation a user gets by default (``sdpa``).
    Nothing is downloaded."""
    make_torchvision_importable()
    import transformers
    torch.manual_seed(seed)
    return _hf_configs(transformers)[name]().eval()


def hf_input_ids(batch: int = 2, seq: int = 16, seed: int = 1) -> torch.Tensor:
    """Random token ids in ``[0, HF_VOCAB)`` of shape ``batch × seq``."""
    return torch.randint(0, HF_VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))
