"""The models of ``benchmarks/library_sweep.py``: tiny random-config models from PyPI libraries.

One function per model, registered with the library it comes from; each returns
``(module, args)`` or ``(module, args, kwargs)`` and is called under ``torch.manual_seed(0)``,
so every build has the same weights and inputs. Nothing is downloaded. Sizes are chosen so
that a forward takes well under a second on one CPU thread. Adding a model is one function
here; ``library_sweep.py`` runs whatever this registry holds.

The libraries are not dependencies of the project: ``pip install -e .[sweep]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class ModelSpec:
    name: str                  # "library.model"
    library: str               # the PyPI distribution
    build: Callable[[], tuple]
    loss: Callable[[Any], torch.Tensor] | None = None  # default: sum of mean squares
    input_grads: bool = False  # also compare the inputs' gradients (modules with no weights)
    infer_in_train_mode: bool = False  # gpytorch: eval() switches to posterior prediction
    note: str = ""
    # "held-out": libraries chosen for this sweep, never looked at while the capture was
    # written; "issue-40": the libraries of the sweep that motivated issue 40 (einops,
    # x-transformers, vit-pytorch, diffusers, torch_geometric, peft), fixed by idiom since;
    # "probe-2": a second held-out probe (normalizing flows, pyro, MoE and efficient-
    # attention packages, RNNs, einx...) whose breaks were then fixed by Python feature;
    # "probe-6": the sixth (issue 39: YOLO, protein LMs, metric-learning and image-quality
    # losses, source separation, self-supervised heads), fixed by feature too; "probe-7": the
    # seventh (spiking nets, SDE/CDE solvers, tabular nets, KANs, CRFs, wavelets, DCTs);
    # "probe-8": the eighth (Riemannian manifolds, DSP filterbanks, NUFFT, flows and
    # invertible nets, a batched ODE solver, MLP-mixers, routed and projected attention);
    # "probe-9": the ninth (conv-STFTs, learned compression, Fourier neural operators,
    # liquid/closed-form continuous-time cells, factorized layers, product-key memory,
    # block-recurrent and Taylor linear attention, state spaces, polar positions);
    # "probe-10": the tenth (equivariant graph nets, rotation maps, SSIM, semiring CRFs,
    # SRUs, chunked / gated / EMA / deformable / halo / invariant-point attention, BYOL's
    # hooks, mogrifier gates); "probe-11": the eleventh (third-party optimizers' step(), an
    # EMA of a model, flow matching, CLIP, TensorDict pipelines, sparse and ring attention,
    # RL policies)
    group: str = "held-out"


REGISTRY: dict[str, ModelSpec] = {}


def register(library: str, **options):
    def wrap(fn):
        name = f"{_short(library)}.{fn.__name__}"
        REGISTRY[name] = ModelSpec(name, library, fn, **options)
        return fn
    return wrap


def _short(library: str) -> str:
    return {"segmentation-models-pytorch": "smp", "open-clip-torch": "open_clip",
            "perceiver-pytorch": "perceiver", "vector-quantize-pytorch": "vq",
            "denoising-diffusion-pytorch": "ddpm", "tab-transformer-pytorch": "tab",
            "local-attention": "local_attention"}.get(library, library)


def _timm_libraries_importable() -> None:
    from tutorcompile.environment import make_torchvision_importable
    make_torchvision_importable()


# kornia: classical vision written as nn.Modules; KORNIA_CHECK argument checks everywhere.

@register("kornia")
def vit():
    from kornia.models.vit import VisionTransformer
    m = VisionTransformer(image_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4)
    return m, (torch.randn(2, 3, 32, 32),)


@register("kornia")
def hardnet():
    import kornia
    return kornia.feature.HardNet(pretrained=False), (torch.randn(4, 1, 32, 32),)


@register("kornia", input_grads=True, note="no weights: gradients of the input")
def sift_descriptor():
    import kornia
    return kornia.feature.SIFTDescriptor(32, 8, 4), (torch.rand(4, 1, 32, 32),)


@register("kornia", input_grads=True, note="no weights: gradients of the input")
def color_filters():
    import kornia

    class Pipeline(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blur = kornia.filters.GaussianBlur2d((5, 5), (1.5, 1.5))
            self.sobel = kornia.filters.Sobel()

        def forward(self, img):
            hsv = kornia.color.rgb_to_hsv(img)
            gray = kornia.color.rgb_to_grayscale(kornia.enhance.adjust_brightness(img, 0.1))
            return self.sobel(self.blur(gray)), hsv

    return Pipeline(), (torch.rand(2, 3, 32, 32),)


# MONAI: medical-imaging networks, configurable blocks, 2-D here.

@register("monai")
def basic_unet():
    from monai.networks.nets import BasicUNet
    m = BasicUNet(spatial_dims=2, in_channels=1, out_channels=2, features=(8, 8, 16, 32, 64, 8))
    return m, (torch.randn(2, 1, 32, 32),)


@register("monai")
def segresnet():
    from monai.networks.nets import SegResNet
    m = SegResNet(spatial_dims=2, init_filters=8, in_channels=1, out_channels=2,
                  blocks_down=(1, 2, 2), blocks_up=(1, 1))
    return m, (torch.randn(2, 1, 32, 32),)


@register("monai")
def unetr():
    from monai.networks.nets import UNETR
    m = UNETR(in_channels=1, out_channels=2, img_size=(32, 32), spatial_dims=2, feature_size=8,
              hidden_size=64, mlp_dim=128, num_heads=4)
    return m, (torch.randn(1, 1, 32, 32),)


@register("monai")
def swin_unetr():
    from monai.networks.nets import SwinUNETR
    m = SwinUNETR(in_channels=1, out_channels=2, spatial_dims=2, feature_size=12,
                  depths=(1, 1, 1, 1), num_heads=(3, 3, 3, 3), window_size=4)
    return m, (torch.randn(1, 1, 64, 64),)


# segmentation-models-pytorch: encoders from a registry, decoders as plain modules.

@register("segmentation-models-pytorch")
def unet_resnet18():
    _timm_libraries_importable()
    import segmentation_models_pytorch as smp
    m = smp.Unet("resnet18", encoder_weights=None, classes=2, decoder_channels=(64, 32, 16, 8, 8))
    return m, (torch.randn(2, 3, 64, 64),)


@register("segmentation-models-pytorch")
def fpn_mobilenet_v2():
    _timm_libraries_importable()
    import segmentation_models_pytorch as smp
    m = smp.FPN("mobilenet_v2", encoder_weights=None, classes=2, decoder_pyramid_channels=32,
                decoder_segmentation_channels=32)
    return m, (torch.randn(2, 3, 64, 64),)


@register("segmentation-models-pytorch")
def segformer_mit_b0():
    _timm_libraries_importable()
    import segmentation_models_pytorch as smp
    m = smp.Segformer("mit_b0", encoder_weights=None, classes=2,
                      decoder_segmentation_channels=32)
    return m, (torch.randn(1, 3, 64, 64),)


# torchtune: decoders assembled by builder functions; TransformerDecoder with KV-cache logic.

_TT = dict(vocab_size=256, num_layers=2, num_heads=4, num_kv_heads=2, embed_dim=64,
           max_seq_len=64)


def _tokens(vocab=256, shape=(2, 16)):
    return torch.randint(0, vocab, shape)


@register("torchtune")
def llama3():
    from torchtune.models.llama3 import llama3 as build
    return build(**_TT), (_tokens(),)


@register("torchtune")
def qwen2():
    from torchtune.models.qwen2 import qwen2 as build
    return build(**_TT, intermediate_dim=128, tie_word_embeddings=True), (_tokens(),)


@register("torchtune")
def gemma():
    from torchtune.models.gemma import gemma as build
    return build(**_TT, head_dim=16, intermediate_dim=128), (_tokens(),)


@register("torchtune")
def lora_llama3():
    from torchtune.models.llama3 import lora_llama3 as build
    return build(["q_proj", "v_proj"], apply_lora_to_mlp=True, lora_rank=4, lora_alpha=8.0,
                 **_TT), (_tokens(),)


# open_clip: CLIP with a ViT or a ModifiedResNet tower; the training loss is ClipLoss.

def _clip_loss(out):
    import open_clip
    return open_clip.ClipLoss()(*out[:3])


def _clip(vision_cfg):
    import open_clip
    m = open_clip.CLIP(
        embed_dim=32, vision_cfg=open_clip.CLIPVisionCfg(**vision_cfg),
        text_cfg=open_clip.CLIPTextCfg(context_length=16, vocab_size=1000, width=64, heads=4,
                                       layers=2))
    image = torch.randn(2, 3, vision_cfg["image_size"], vision_cfg["image_size"])
    return m, (image, torch.randint(1, 1000, (2, 16)))


@register("open-clip-torch", loss=_clip_loss)
def clip_vit():
    return _clip(dict(layers=2, width=64, head_width=16, patch_size=8, image_size=32))


@register("open-clip-torch", loss=_clip_loss)
def clip_resnet():
    return _clip(dict(layers=(1, 1, 1, 1), width=16, head_width=16, image_size=64))


# lucidrains' libraries: einops, exists()/default() helpers, decorators, *args plumbing.

@register("perceiver-pytorch")
def perceiver():
    from perceiver_pytorch import Perceiver
    m = Perceiver(num_freq_bands=4, depth=2, max_freq=10.0, input_channels=3, input_axis=2,
                  num_latents=16, latent_dim=32, cross_dim_head=16, latent_dim_head=16,
                  latent_heads=2, num_classes=10)
    return m, (torch.randn(2, 16, 16, 3),)


@register("perceiver-pytorch")
def perceiver_io():
    from perceiver_pytorch import PerceiverIO
    m = PerceiverIO(depth=2, dim=32, queries_dim=16, logits_dim=10, num_latents=16,
                    latent_dim=32, cross_dim_head=16, latent_dim_head=16, latent_heads=2)
    return m, (torch.randn(2, 24, 32),), {"queries": torch.randn(2, 8, 16)}


@register("vector-quantize-pytorch", input_grads=True, note="EMA codebook: no weights")
def vector_quantize():
    from vector_quantize_pytorch import VectorQuantize
    return VectorQuantize(dim=32, codebook_size=64, decay=0.8), (torch.randn(2, 16, 32),)


@register("vector-quantize-pytorch", input_grads=True, note="EMA codebooks: no weights")
def residual_vq():
    from vector_quantize_pytorch import ResidualVQ
    m = ResidualVQ(dim=32, num_quantizers=3, codebook_size=64)
    return m, (torch.randn(2, 16, 32),)


@register("vector-quantize-pytorch")
def fsq():
    from vector_quantize_pytorch import FSQ
    return FSQ(levels=[8, 5, 5, 5], dim=32), (torch.randn(2, 16, 32),)


@register("vector-quantize-pytorch")
def lfq():
    from vector_quantize_pytorch import LFQ
    return LFQ(dim=32, codebook_size=2 ** 6), (torch.randn(2, 16, 32),)


@register("denoising-diffusion-pytorch")
def unet():
    from denoising_diffusion_pytorch import Unet
    m = Unet(dim=16, dim_mults=(1, 2), channels=3, attn_dim_head=8, attn_heads=2)
    return m, (torch.randn(2, 3, 16, 16), torch.tensor([3.0, 70.0]))


@register("denoising-diffusion-pytorch", note="random t and noise inside forward")
def gaussian_diffusion():
    from denoising_diffusion_pytorch import GaussianDiffusion, Unet
    unet = Unet(dim=16, dim_mults=(1, 2), channels=3, attn_dim_head=8, attn_heads=2)
    m = GaussianDiffusion(unet, image_size=16, timesteps=100)
    return m, (torch.rand(2, 3, 16, 16),)


@register("tab-transformer-pytorch")
def tab_transformer():
    from tab_transformer_pytorch import TabTransformer
    m = TabTransformer(categories=(5, 6, 7), num_continuous=4, dim=32, depth=2, heads=4,
                       dim_out=1, mlp_hidden_mults=(4, 2), mlp_act=torch.nn.ReLU())
    return m, (torch.stack([torch.randint(0, n, (8,)) for n in (5, 6, 7)], 1),
               torch.randn(8, 4))


@register("tab-transformer-pytorch")
def ft_transformer():
    from tab_transformer_pytorch import FTTransformer
    m = FTTransformer(categories=(5, 6, 7), num_continuous=4, dim=32, depth=2, heads=4,
                      dim_out=1)
    return m, (torch.stack([torch.randint(0, n, (8,)) for n in (5, 6, 7)], 1),
               torch.randn(8, 4))


@register("local-attention")
def local_transformer():
    from local_attention import LocalTransformer
    m = LocalTransformer(num_tokens=256, max_seq_len=64, dim=32, depth=2, causal=True,
                         local_attn_window_size=8, dim_head=16, heads=2)
    return m, (_tokens(256, (2, 32)),)


# e3nn: irreps algebra; tensor products are code generated with torch.fx at construction.

@register("e3nn")
def tensor_product():
    from e3nn import o3
    m = o3.FullyConnectedTensorProduct("4x0e + 2x1o + 1x2e", "1x0e + 1x1o", "4x0e + 2x1o")
    return m, (o3.Irreps("4x0e + 2x1o + 1x2e").randn(8, -1),
               o3.Irreps("1x0e + 1x1o").randn(8, -1))


@register("e3nn")
def gated_network():
    from e3nn import nn as enn
    from e3nn import o3

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sh = o3.Irreps.spherical_harmonics(2)
            self.gate = enn.Gate("8x0e", [torch.tanh], "4x0e", [torch.sigmoid], "4x1o")
            self.lin1 = o3.Linear(self.sh, self.gate.irreps_in)
            self.tp = o3.FullyConnectedTensorProduct(self.gate.irreps_out, self.sh, "4x0e+2x1o")
            self.lin2 = o3.Linear("4x0e+2x1o", "1x0e")

        def forward(self, pos):
            sh = o3.spherical_harmonics(self.sh, pos, normalize=True)
            return self.lin2(self.tp(self.gate(self.lin1(sh)), sh)).sum()

    return Net(), (torch.randn(16, 3),)


# gpytorch: distributions of lazy linear operators, settings as context managers.

class _ExactGP:
    @staticmethod
    def build():
        import gpytorch

        class GP(gpytorch.models.ExactGP):
            def __init__(self, x, y, likelihood):
                super().__init__(x, y, likelihood)
                self.mean_module = gpytorch.means.ConstantMean()
                self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

            def forward(self, x):
                return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                                 self.covar_module(x))

        class NegativeMLL(torch.nn.Module):
            """-log p(y | x) of an exact GP on its training data: the quantity one trains."""

            def __init__(self, x, y):
                super().__init__()
                self.likelihood = gpytorch.likelihoods.GaussianLikelihood()
                self.gp = GP(x, y, self.likelihood)
                self.mll = gpytorch.mlls.ExactMarginalLogLikelihood(self.likelihood, self.gp)

            def forward(self, x, y):
                return -self.mll(self.gp(x), y)

        x = torch.linspace(0, 1, 24).unsqueeze(-1)
        y = torch.sin(6 * x.squeeze(-1)) + 0.1 * torch.randn(24)
        return NegativeMLL(x, y), (x, y)


@register("gpytorch", loss=lambda out: out, infer_in_train_mode=True,
          note="forward = negative marginal log likelihood")
def exact_gp():
    return _ExactGP.build()


@register("gpytorch", loss=lambda out: out, infer_in_train_mode=True,
          note="forward = negative ELBO")
def svgp():
    import gpytorch

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self, inducing):
            dist = gpytorch.variational.CholeskyVariationalDistribution(inducing.size(0))
            strategy = gpytorch.variational.VariationalStrategy(
                self, inducing, dist, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    class NegativeELBO(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gp = SVGP(torch.linspace(0, 1, 8).unsqueeze(-1))
            self.likelihood = gpytorch.likelihoods.GaussianLikelihood()
            self.elbo = gpytorch.mlls.VariationalELBO(self.likelihood, self.gp, num_data=32)

        def forward(self, x, y):
            return -self.elbo(self.gp(x), y)

    x = torch.rand(32, 1)
    return NegativeELBO(), (x, torch.sin(6 * x.squeeze(-1)))


# torchdiffeq: ODE solvers, Python loops over time steps (fixed or adaptive).

def _ode_block(**odeint_kwargs):
    import torchdiffeq

    class Func(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                                           torch.nn.Linear(32, 8))

        def forward(self, t, y):
            return self.net(y)

    class ODEBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.func = Func()
            self.register_buffer("t", torch.tensor([0.0, 1.0]))

        def forward(self, y0):
            return torchdiffeq.odeint(self.func, y0, self.t, **odeint_kwargs)[-1]

    return ODEBlock(), (torch.randn(4, 8),)


@register("torchdiffeq")
def rk4():
    return _ode_block(method="rk4", options=dict(step_size=0.25))


@register("torchdiffeq", note="adaptive steps: a data-dependent while loop")
def dopri5():
    return _ode_block(method="dopri5", rtol=1e-3, atol=1e-4)


# --- the libraries of the sweep behind issue 40 (group "issue-40") ---------------------------
# einops-based code, x-transformers, vit-pytorch, diffusers, torch_geometric, peft: the
# capture was fixed by idiom against these, so they are reported apart from the held-out set.

@register("einops", group="issue-40", note="rearrange/reduce/repeat/pack in forward")
def einops_net():
    from einops import pack, rearrange, reduce, repeat, unpack
    from einops.layers.torch import Rearrange

    class Attention(torch.nn.Module):
        def __init__(self, dim=32, heads=2):
            super().__init__()
            self.heads = heads
            self.qkv = torch.nn.Linear(dim, dim * 3)
            self.out = torch.nn.Sequential(Rearrange("b h n d -> b n (h d)"),
                                           torch.nn.Linear(dim, dim))

        def forward(self, x):
            q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads),
                          self.qkv(x).chunk(3, dim=-1))
            attn = (q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5).softmax(-1)
            return self.out(attn @ v)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Sequential(
                Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4),
                torch.nn.Linear(48, 32))
            self.cls = torch.nn.Parameter(torch.randn(32))
            self.attn = Attention()

        def forward(self, img):
            x = self.embed(img)
            cls = repeat(self.cls, "d -> b 1 d", b=x.shape[0])
            x, shape = pack([cls, x], "b * d")
            x = x + self.attn(x)
            cls, x = unpack(x, shape, "b * d")
            return reduce(x, "b n d -> b d", "mean") + rearrange(cls, "b 1 d -> b d")

    return Net(), (torch.randn(2, 3, 16, 16),)


@register("x-transformers", group="issue-40")
def decoder_rotary():
    from x_transformers import Decoder, TransformerWrapper
    m = TransformerWrapper(num_tokens=256, max_seq_len=32, attn_layers=Decoder(
        dim=32, depth=2, heads=2, rotary_pos_emb=True))
    return m, (_tokens(256, (2, 16)),)


@register("x-transformers", group="issue-40")
def encoder_glu_rmsnorm():
    from x_transformers import Encoder, TransformerWrapper
    m = TransformerWrapper(num_tokens=256, max_seq_len=32, attn_layers=Encoder(
        dim=32, depth=2, heads=2, ff_glu=True, use_rmsnorm=True))
    return m, (_tokens(256, (2, 16)),)


@register("vit-pytorch", group="issue-40")
def simple_vit():
    _timm_libraries_importable()
    from vit_pytorch import ViT
    m = ViT(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2, heads=2,
            mlp_dim=64)
    return m, (torch.randn(2, 3, 32, 32),)


@register("vit-pytorch", group="issue-40")
def cait():
    _timm_libraries_importable()
    from vit_pytorch.cait import CaiT
    m = CaiT(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2, cls_depth=1,
             heads=2, mlp_dim=64)
    return m, (torch.randn(2, 3, 32, 32),)


@register("diffusers", group="issue-40")
def unet_conditional():
    _timm_libraries_importable()
    from diffusers import UNet2DConditionModel
    m = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
        block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
        attention_head_dim=8, norm_num_groups=8)
    return m, (torch.randn(2, 4, 16, 16), torch.tensor([10, 20]), torch.randn(2, 5, 32))


@register("diffusers", group="issue-40")
def vae():
    _timm_libraries_importable()
    from diffusers import AutoencoderKL
    m = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                      up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64),
                      latent_channels=4, norm_num_groups=8, sample_size=16)
    return m, (torch.randn(2, 3, 16, 16),)


def _graph():
    return torch.randn(10, 8), torch.randint(0, 10, (2, 30))


@register("torch_geometric", group="issue-40")
def gcn():
    from torch_geometric.nn import GCN
    return GCN(8, 16, num_layers=2, out_channels=4), _graph()


@register("torch_geometric", group="issue-40")
def graph_sage():
    from torch_geometric.nn import GraphSAGE
    return GraphSAGE(8, 16, num_layers=2, out_channels=4), _graph()


@register("torch_geometric", group="issue-40")
def gin():
    from torch_geometric.nn import GIN
    return GIN(8, 16, num_layers=2, out_channels=4), _graph()


@register("peft", group="issue-40")
def lora_llama():
    _timm_libraries_importable()
    import peft.tuners.lora.torchao
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM
    # torchtune (this sweep's torchao<0.12) and peft (which refuses torchao<0.16 when one
    # is installed) cannot share an environment's torchao; LoRA on Linear needs none
    peft.tuners.lora.torchao.is_torchao_available = lambda: False
    base = LlamaForCausalLM(LlamaConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    m = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                        lora_dropout=0.0))
    return m, (_tokens(256, (2, 12)),)


# --- the second held-out probe (group "probe-2") ---------------------------------------------
# Fixed by feature since: identity ==, object.__new__, metaclass __call__, ParameterList,
# sets of modules, autograd.Function.apply spellings, validation branches that raise, weak
# references, dict |, typing constants. What still breaks is listed by the sweep itself.

def _probe(library: str, **options):
    return register(library, group="probe-2", **options)


class _LogProb(torch.nn.Module):
    """A flow or distribution's log-density of ``x`` given ``c`` (the module to train)."""

    def __init__(self, flow):
        super().__init__()
        self.flow = flow

    def forward(self, x, c):
        return self.flow(c).log_prob(x)


@_probe("zuko")
def nsf():
    import zuko
    flow = zuko.flows.NSF(features=3, context=2, transforms=2, hidden_features=(16, 16))
    return _LogProb(flow), (torch.randn(4, 3), torch.randn(4, 2))


@_probe("normflows")
def real_nvp():
    import normflows as nf
    flows = []
    for _ in range(2):
        flows += [nf.flows.AffineCouplingBlock(nf.nets.MLP([1, 16, 2], init_zeros=True)),
                  nf.flows.Permute(2, mode="swap")]
    model = nf.NormalizingFlow(nf.distributions.base.DiagGaussian(2), flows)

    class LogProb(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model.log_prob(x)

    return LogProb(), (torch.randn(4, 2),)


class _GaussianHead(torch.nn.Module):
    """A policy head: a Normal (validated, as torch.distributions are by default) or a
    mixture, scored on targets."""

    def __init__(self, dist, mixture=False):
        super().__init__()
        self.dist, self.mixture = dist, mixture
        self.linear = torch.nn.Linear(4, 6)

    def forward(self, x, y):
        h = self.linear(x)
        if not self.mixture:
            return self.dist.Normal(h[:, 0], h[:, 1].exp()).log_prob(y).sum()
        d = torch.distributions
        comp = d.Independent(d.Normal(h[:, 2:4, None], h[:, 4:6, None].exp()), 1)
        return d.MixtureSameFamily(d.Categorical(logits=h[:, :2]), comp).log_prob(
            y[:, None]).mean()


@_probe("pyro-ppl")
def normal_head():
    import pyro.distributions
    return _GaussianHead(pyro.distributions), (torch.randn(5, 4), torch.randn(5))


@_probe("pyro-ppl", note="torch.distributions, validated: the library pyro builds on")
def mixture_head():
    return _GaussianHead(torch.distributions, mixture=True), (torch.randn(5, 4),
                                                              torch.randn(5))


@_probe("entmax")
def sparse_attention():
    from entmax import entmax15, sparsemax

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.linear(x)
            return entmax15(h, dim=-1) + sparsemax(h, dim=-1)

    return Net(), (torch.randn(4, 8),)


@_probe("performer-pytorch")
def performer():
    from performer_pytorch import PerformerLM
    return PerformerLM(num_tokens=256, max_seq_len=32, dim=32, depth=2, heads=2,
                       nb_features=16), (_tokens(),)


@_probe("reformer-pytorch", note="reversible layers: an autograd.Function over modules")
def reformer():
    from reformer_pytorch import ReformerLM
    return ReformerLM(num_tokens=256, dim=32, depth=2, max_seq_len=32, heads=2,
                      lsh_dropout=0.0, causal=True, bucket_size=4), (_tokens(256, (2, 32)),)


@_probe("linear-attention-transformer")
def linear_attention():
    from linear_attention_transformer import LinearAttentionTransformerLM
    return LinearAttentionTransformerLM(num_tokens=256, dim=32, heads=2, depth=2,
                                        max_seq_len=32, causal=True), (_tokens(),)


@_probe("st-moe-pytorch", loss=lambda out: out[0].square().mean() + out[1],
        note="top-2 routing: a data-dependent one_hot (torch.compile breaks too)")
def st_moe():
    from st_moe_pytorch import MoE

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.moe = MoE(dim=32, num_experts=4, gating_top_n=2)

        def forward(self, x):
            out, aux, *_ = self.moe(x)
            return out, aux

    return Net(), (torch.randn(2, 16, 32),)


@_probe("soft-moe-pytorch")
def soft_moe():
    from soft_moe_pytorch import SoftMoE
    return SoftMoE(dim=32, seq_len=16, num_experts=4), (torch.randn(2, 16, 32),)


@_probe("mambapy", note="a parallel scan as an autograd.Function kept in a global")
def mamba():
    from mambapy.mamba import Mamba, MambaConfig
    return Mamba(MambaConfig(d_model=16, n_layers=2, d_state=4)), (torch.randn(2, 8, 16),)


@_probe("pytorch-tcn")
def tcn():
    from pytorch_tcn import TCN
    return TCN(num_inputs=4, num_channels=[8, 8], kernel_size=3), (torch.randn(2, 4, 16),)


@_probe("torchmetrics", note="functional metrics as a loss")
def metrics():
    import torchmetrics.functional as tmf

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x, t):
            p = self.linear(x).softmax(-1)
            return tmf.kl_divergence(p, t.softmax(-1)), tmf.cosine_similarity(p, t)

    return Net(), (torch.randn(5, 4), torch.randn(5, 3))


@_probe("rotary-embedding-torch")
def rotary():
    from rotary_embedding_torch import RotaryEmbedding

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rotary, self.q = RotaryEmbedding(dim=8), torch.nn.Linear(16, 16)

        def forward(self, x):
            return self.rotary.rotate_queries_or_keys(self.q(x).view(2, 2, 6, 8))

    return Net(), (torch.randn(2, 6, 16),)


@_probe("hyper-connections")
def hyper_connections():
    from hyper_connections import get_init_and_expand_reduce_stream_functions
    init, expand, reduce = get_init_and_expand_reduce_stream_functions(4)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = init(dim=16, branch=torch.nn.Linear(16, 16))

        def forward(self, x):
            return reduce(self.block(expand(x)))

    return Net(), (torch.randn(2, 5, 16),)


@_probe("einx", note="einx parses its expressions with caches keyed by its own objects")
def einx_ops():
    import einx

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 4))

        def forward(self, x):
            y = einx.rearrange("b n d -> b d n", einx.dot("b n [c], [c] d -> b n d", x, self.w))
            return einx.mean("b d [n]", y) + einx.softmax("b [d] n", y).sum()

    return Net(), (torch.randn(2, 5, 8),)


@_probe("torch", note="nn.LSTM and nn.GRU (weak references to their weights)")
def recurrent():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = torch.nn.GRU(32, 8, batch_first=True)

        def forward(self, x):
            y, (h, c) = self.lstm(x)
            return self.gru(y)[0], h, c

    return Net(), (torch.randn(2, 5, 8),)


# --- the sixth held-out probe (group "probe-6", issue 39) -----------------------------------
# ultralytics (YOLO from its yaml), fair-esm, pytorch-metric-learning, piq, efficientnet_pytorch,
# facenet-pytorch, demucs, lightly, sentence-transformers. Fixed by feature since: a list
# extended by a generator that reads it, a tuple inside an index, writes through views
# (``diagonal``, ``fill_diagonal_``) and into reshape copies, in-place and ``out=`` results
# that are their tensor, weight_norm / spectral_norm / prune hooks, fill values that are 0-d
# tensors, ``t.data = t.data``, checks after writes into the graph's own tensors.
# facenet-pytorch pins torch < 2.3: install it with ``pip install --no-deps facenet-pytorch``.

def _probe6(library: str, **options):
    return register(library, group="probe-6", **options)


# ultralytics: YOLO built from the yaml shipped with the package (no weights)
def _yolo(kind, yaml, size=64, **kw):
    import logging

    import ultralytics.nn.tasks as t
    logging.getLogger("ultralytics").setLevel(logging.ERROR)
    m = getattr(t, kind)(yaml, verbose=False, **kw)
    return m, (torch.rand(2, 3, size, size),)


def _yolo_loss(out):
    flat = []

    def walk(o):
        if isinstance(o, torch.Tensor) and o.is_floating_point():
            flat.append(o)
        elif isinstance(o, (list, tuple)):
            for x in o:
                walk(x)
        elif isinstance(o, dict):
            for x in o.values():
                walk(x)
    walk(out)
    return sum(t.pow(2).mean() for t in flat)


@_probe6("ultralytics", loss=_yolo_loss)
def yolov8n():
    return _yolo("DetectionModel", "yolov8n.yaml", nc=4)


@_probe6("ultralytics", loss=_yolo_loss)
def yolov8n_seg():
    return _yolo("SegmentationModel", "yolov8n-seg.yaml", nc=4)


@_probe6("ultralytics", loss=_yolo_loss)
def yolov8n_cls():
    return _yolo("ClassificationModel", "yolov8n-cls.yaml", size=32, nc=10)


# fair-esm: protein language models from tiny configs
def _esm_tokens(b=2, n=12):
    g = torch.randint(4, 24, (b, n))
    g[:, 0] = 0  # cls
    g[:, -1] = 2  # eos
    return g


@_probe6("fair-esm")
def esm2():
    from esm.model.esm2 import ESM2
    m = ESM2(num_layers=2, embed_dim=32, attention_heads=4, alphabet="ESM-1b")
    return m, (_esm_tokens(),), {"repr_layers": [1, 2]}


@_probe6("fair-esm")
def esm2_contacts():
    from esm.model.esm2 import ESM2
    m = ESM2(num_layers=2, embed_dim=32, attention_heads=4, alphabet="ESM-1b")
    return m, (_esm_tokens(),), {"return_contacts": True}


@_probe6("fair-esm")
def msa_transformer():
    import argparse

    import esm
    from esm.model.msa_transformer import MSATransformer
    alphabet = esm.data.Alphabet.from_architecture("msa_transformer")
    args = argparse.Namespace(layers=2, embed_dim=32, ffn_embed_dim=64, attention_heads=4,
                              dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                              max_tokens_per_msa=2 ** 14, max_tokens=2 ** 14, max_positions=64,
                              embed_positions_msa=True)
    m = MSATransformer(args, alphabet)
    toks = torch.randint(4, 24, (2, 3, 10))
    toks[..., 0] = alphabet.cls_idx
    return m, (toks,)


# pytorch-metric-learning: losses (and miners) as modules
def _emb():
    return torch.randn(8, 16), torch.tensor([0, 1, 0, 1, 2, 2, 3, 3])


@_probe6("pytorch-metric-learning", loss=lambda out: out)
def arcface_loss():
    from pytorch_metric_learning import losses
    return losses.ArcFaceLoss(num_classes=4, embedding_size=16), _emb()


@_probe6("pytorch-metric-learning", loss=lambda out: out, input_grads=True,
          note="no weights: gradients of the input")
def ntxent_loss():
    from pytorch_metric_learning import losses
    return losses.NTXentLoss(temperature=0.1), _emb()


@_probe6("pytorch-metric-learning", loss=lambda out: out, input_grads=True,
          note="no weights: gradients of the input")
def triplet_margin_loss():
    from pytorch_metric_learning import losses
    return losses.TripletMarginLoss(margin=0.2), _emb()


@_probe6("pytorch-metric-learning", loss=lambda out: out, input_grads=True,
          note="no weights: gradients of the input")
def multi_similarity_loss():
    from pytorch_metric_learning import losses
    return losses.MultiSimilarityLoss(), _emb()


# piq: image-quality metrics used as losses
def _pair(size=48):
    return torch.rand(2, 3, size, size), torch.rand(2, 3, size, size)


@_probe6("piq", loss=lambda out: out, input_grads=True, note="no weights")
def ssim_loss():
    import piq
    return piq.SSIMLoss(data_range=1.0), _pair()


@_probe6("piq", loss=lambda out: out, input_grads=True, note="no weights")
def gmsd_loss():
    import piq
    return piq.GMSDLoss(data_range=1.0), _pair()


@_probe6("piq", loss=lambda out: out, input_grads=True, note="no weights")
def haarpsi_loss():
    import piq
    return piq.HaarPSILoss(data_range=1.0), _pair(64)


@_probe6("piq", loss=lambda out: out, input_grads=True, note="no weights")
def total_variation():
    import piq
    return piq.TVLoss(), _pair()[:1]


# efficientnet_pytorch
@_probe6("efficientnet_pytorch")
def efficientnet_b0():
    from efficientnet_pytorch import EfficientNet
    m = EfficientNet.from_name("efficientnet-b0", num_classes=10, image_size=32)
    return m, (torch.randn(2, 3, 32, 32),)


# facenet-pytorch
@_probe6("facenet-pytorch")
def inception_resnet_v1():
    from facenet_pytorch import InceptionResnetV1
    return InceptionResnetV1(pretrained=None), (torch.randn(2, 3, 80, 80),)


@_probe6("facenet-pytorch")
def mtcnn_onet():
    from facenet_pytorch.models.mtcnn import ONet
    return ONet(pretrained=False), (torch.randn(2, 3, 48, 48),)


# demucs / openunmix: music source separation
@_probe6("demucs")
def demucs_v2():
    from demucs.demucs import Demucs
    m = Demucs(sources=["a", "b"], channels=8, depth=2, lstm_layers=1)
    return m, (torch.randn(2, 2, 800),)


@_probe6("demucs")
def htdemucs():
    from demucs.htdemucs import HTDemucs
    m = HTDemucs(sources=["a", "b"], channels=8, depth=2, nfft=256, t_layers=1, t_heads=2,
                 segment=1, samplerate=2048)
    return m, (torch.randn(2, 2, 2048),)


# lightly: self-supervised heads and losses
@_probe6("lightly")
def simclr():
    from lightly.loss import NTXentLoss
    from lightly.models import ResNetGenerator
    from lightly.models.modules import SimCLRProjectionHead

    class SimCLR(torch.nn.Module):
        def __init__(self):
            super().__init__()
            resnet = ResNetGenerator("resnet-9", width=0.125)
            self.backbone = torch.nn.Sequential(*list(resnet.children())[:-1],
                                                torch.nn.AdaptiveAvgPool2d(1))
            self.head = SimCLRProjectionHead(64, 32, 16)
            self.criterion = NTXentLoss(temperature=0.5)

        def forward(self, x0, x1):
            z0 = self.head(self.backbone(x0).flatten(start_dim=1))
            z1 = self.head(self.backbone(x1).flatten(start_dim=1))
            return self.criterion(z0, z1)

    return SimCLR(), (torch.randn(4, 3, 16, 16), torch.randn(4, 3, 16, 16))


@_probe6("lightly")
def dino():
    from lightly.loss import DINOLoss
    from lightly.models.modules import DINOProjectionHead

    class DINO(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.student = DINOProjectionHead(32, 64, 16, 64)
            self.teacher = DINOProjectionHead(32, 64, 16, 64)
            self.criterion = DINOLoss(output_dim=64, warmup_teacher_temp_epochs=0)

        def forward(self, x0, x1):
            t = [self.teacher(x0).detach()]
            s = [self.student(x0), self.student(x1)]
            return self.criterion(t, s, epoch=0)

    return DINO(), (torch.randn(4, 32), torch.randn(4, 32))


@_probe6("lightly")
def barlow_twins():
    from lightly.loss import BarlowTwinsLoss
    from lightly.models.modules import BarlowTwinsProjectionHead

    class BT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = BarlowTwinsProjectionHead(32, 64, 32)
            self.criterion = BarlowTwinsLoss()

        def forward(self, x0, x1):
            return self.criterion(self.head(x0), self.head(x1))

    return BT(), (torch.randn(4, 32), torch.randn(4, 32))


# sentence-transformers over a tiny BERT saved locally
def _tiny_bert_dir():
    import os
    import tempfile

    from transformers import BertConfig, BertModel, BertTokenizer
    path = os.path.join(tempfile.gettempdir(), "library_sweep_tiny_bert")
    if not os.path.exists(os.path.join(path, "vocab.txt")):
        os.makedirs(path, exist_ok=True)
        vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
        with open(os.path.join(path, "vocab.txt"), "w") as f:
            f.write("\n".join(vocab) + "\n")
        BertTokenizer(os.path.join(path, "vocab.txt")).save_pretrained(path)
        cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64,
                         max_position_embeddings=64)
        BertModel(cfg).save_pretrained(path)
    return path


@_probe6("sentence-transformers")
def mean_pooling():
    from sentence_transformers import SentenceTransformer, models
    path = _tiny_bert_dir()
    word = models.Transformer(path, max_seq_length=16)
    m = SentenceTransformer(modules=[word, models.Pooling(32, "mean"), models.Normalize()],
                            device="cpu")
    ids = torch.randint(5, 100, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    return m, ({"input_ids": ids, "attention_mask": mask},)


# --- the seventh held-out probe (group "probe-7") --------------------------------------------
# snntorch (spiking neurons: state in module attributes, surrogate-gradient autograd.Functions),
# torchsde and torchcde (SDE/CDE solvers), rtdl_revisiting_models and pytorch-tabnet (tabular
# nets: ghost batch norm, sparsemax), pykan (B-spline KANs), nystrom-attention, axial-attention,
# siren-pytorch, pytorch-crf (a CRF's log-likelihood), ptwt and torch-dct (wavelet and cosine
# transforms), mixture-of-experts (top-2 gating) and BS-RoFormer (band-split STFT transformer).

def _probe7(library: str, **options):
    return register(library, group="probe-7", **options)


# snntorch: leaky integrate-and-fire neurons unrolled over time steps
@_probe7("snntorch", note="membrane state passed by hand; spikes through a surrogate gradient")
def leaky_snn():
    import snntorch as snn

    class Net(torch.nn.Module):
        def __init__(self, steps=4):
            super().__init__()
            self.steps = steps
            self.fc1 = torch.nn.Linear(8, 16)
            self.lif1 = snn.Leaky(beta=0.9)
            self.fc2 = torch.nn.Linear(16, 4)
            self.lif2 = snn.Leaky(beta=0.8, learn_beta=True)

        def forward(self, x):
            mem1, mem2 = self.lif1.reset_mem(), self.lif2.reset_mem()
            spikes, mems = [], []
            for _ in range(self.steps):
                s1, mem1 = self.lif1(self.fc1(x), mem1)
                s2, mem2 = self.lif2(self.fc2(s1), mem2)
                spikes.append(s2)
                mems.append(mem2)
            return torch.stack(spikes), torch.stack(mems)

    return Net(), (torch.randn(3, 8),)


@_probe7("snntorch", note="init_hidden=True: the neurons keep their state in attributes")
def synaptic_sequential():
    import snntorch as snn
    from snntorch import surrogate, utils

    class Net(torch.nn.Module):
        def __init__(self, steps=3):
            super().__init__()
            self.steps = steps
            grad = surrogate.fast_sigmoid(slope=25)
            self.net = torch.nn.Sequential(
                torch.nn.Linear(6, 12),
                snn.Synaptic(alpha=0.9, beta=0.85, spike_grad=grad, init_hidden=True),
                torch.nn.Linear(12, 3),
                snn.Leaky(beta=0.9, spike_grad=grad, init_hidden=True, output=True))

        def forward(self, x):
            utils.reset(self.net)
            outs = []
            for _ in range(self.steps):
                spk, mem = self.net(x)
                outs.append(mem)
            return torch.stack(outs)

    return Net(), (torch.randn(2, 6),)


# torchsde / torchcde: differential equations with learned fields
@_probe7("torchsde", note="Euler-Maruyama over a Brownian path of fixed entropy")
def neural_sde():
    import torchsde

    class SDE(torch.nn.Module):
        noise_type, sde_type = "diagonal", "ito"

        def __init__(self):
            super().__init__()
            self.mu = torch.nn.Linear(3, 3)
            self.sigma = torch.nn.Linear(3, 3)

        def f(self, t, y):
            return torch.tanh(self.mu(y))

        def g(self, t, y):
            return torch.sigmoid(self.sigma(y))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sde = SDE()

        def forward(self, y0):
            ts = torch.linspace(0, 1, 5)
            bm = torchsde.BrownianInterval(t0=0.0, t1=1.0, size=y0.shape, dtype=y0.dtype,
                                           entropy=0)   # a fixed path: runs compare
            return torchsde.sdeint(self.sde, y0, ts, method="euler", dt=0.25, bm=bm)

    return Net(), (torch.randn(2, 3),)


@_probe7("torchcde", note="a cubic spline of the path, solved with rk4")
def neural_cde():
    import torchcde

    class Field(torch.nn.Module):
        def __init__(self, hidden=4, channels=3):
            super().__init__()
            self.hidden, self.channels = hidden, channels
            self.linear = torch.nn.Linear(hidden, hidden * channels)

        def forward(self, t, z):
            return self.linear(z).tanh().view(z.size(0), self.hidden, self.channels)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.initial = torch.nn.Linear(3, 4)
            self.field = Field()
            self.readout = torch.nn.Linear(4, 2)

        def forward(self, x):
            coeffs = torchcde.hermite_cubic_coefficients_with_backward_differences(x)
            X = torchcde.CubicSpline(coeffs)
            z0 = self.initial(X.evaluate(X.interval[0]))
            z = torchcde.cdeint(X=X, z0=z0, func=self.field, t=X.interval, method="rk4",
                                options={"step_size": 0.5})
            return self.readout(z[:, 1])

    t = torch.linspace(0, 1, 6).expand(2, 6).unsqueeze(-1)
    return Net(), (torch.cat([t, torch.randn(2, 6, 2)], dim=-1),)


# rtdl_revisiting_models: MLP, ResNet and FT-Transformer for tabular data
@_probe7("rtdl_revisiting_models")
def ft_transformer_rtdl():
    from rtdl_revisiting_models import FTTransformer
    m = FTTransformer(n_cont_features=3, cat_cardinalities=[4, 5], d_out=2, n_blocks=2,
                      d_block=16, attention_n_heads=4, attention_dropout=0.0, ffn_d_hidden=None,
                      ffn_d_hidden_multiplier=4 / 3, ffn_dropout=0.0, residual_dropout=0.0)
    return m, (torch.randn(4, 3), torch.stack([torch.randint(0, 4, (4,)),
                                                torch.randint(0, 5, (4,))], 1))


@_probe7("rtdl_revisiting_models")
def resnet_rtdl():
    from rtdl_revisiting_models import ResNet
    m = ResNet(d_in=6, d_out=2, n_blocks=2, d_block=16, d_hidden=None, d_hidden_multiplier=2.0,
               dropout1=0.0, dropout2=0.0)
    return m, (torch.randn(4, 6),)


# pytorch-tabnet: sequential attention with sparsemax masks and ghost batch norm
@_probe7("pytorch-tabnet", loss=lambda out: out[0].pow(2).mean() + out[1])
def tabnet():
    from pytorch_tabnet.tab_network import TabNet
    from pytorch_tabnet.utils import create_group_matrix
    m = TabNet(input_dim=6, output_dim=3, n_d=8, n_a=8, n_steps=2, cat_idxs=[0], cat_dims=[4],
               cat_emb_dim=[2], virtual_batch_size=4,
               group_attention_matrix=create_group_matrix([], 6))
    x = torch.randn(8, 6)
    x[:, 0] = torch.randint(0, 4, (8,)).float()
    return m, (x,)


# pykan: Kolmogorov-Arnold networks of B-splines
@_probe7("pykan", note="B-spline bases; forward keeps activations in attributes")
def kan():
    import os
    import tempfile

    from kan import KAN
    m = KAN(width=[3, 4, 1], grid=4, k=3, seed=0, auto_save=False,
            ckpt_path=os.path.join(tempfile.gettempdir(), "library_sweep_kan"))
    return m, (torch.rand(5, 3) * 2 - 1,)


# nystrom-attention, axial-attention, siren-pytorch (lucidrains, einops and small helpers)
@_probe7("nystrom-attention")
def nystromformer():
    from nystrom_attention import Nystromformer
    m = Nystromformer(dim=32, dim_head=8, heads=4, depth=2, num_landmarks=8, pinv_iterations=4)
    mask = torch.ones(2, 30, dtype=torch.bool)
    mask[1, 25:] = False
    return m, (torch.randn(2, 30, 32),), {"mask": mask}


@_probe7("axial-attention")
def axial_image_transformer():
    from axial_attention import AxialImageTransformer, AxialPositionalEmbedding

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = AxialPositionalEmbedding(dim=8, shape=(6, 6))
            self.body = AxialImageTransformer(dim=8, depth=2, heads=2, reversible=False)

        def forward(self, x):
            return self.body(self.pos(x))

    return Net(), (torch.randn(2, 8, 6, 6),)


@_probe7("axial-attention", note="attention along each axis of a 3-d volume, summed")
def axial_attention_3d():
    from axial_attention import AxialAttention
    m = AxialAttention(dim=8, num_dimensions=3, heads=2, dim_index=1, sum_axial_out=True)
    return m, (torch.randn(2, 8, 3, 4, 5),)


@_probe7("siren-pytorch")
def siren_wrapper():
    from siren_pytorch import SirenNet, SirenWrapper
    net = SirenNet(dim_in=2, dim_hidden=16, dim_out=3, num_layers=3, w0_initial=30.0)
    m = SirenWrapper(net, image_width=8, image_height=8, latent_dim=4)
    return m, (), {"img": torch.randn(1, 3, 8, 8), "latent": torch.randn(4)}


# pytorch-crf: a linear-chain CRF's log-likelihood (Python loop over time, masks)
@_probe7("pytorch-crf", loss=lambda out: -out)
def crf_log_likelihood():
    from torchcrf import CRF

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(6, 5)
            self.crf = CRF(5, batch_first=True)

        def forward(self, x, tags, mask):
            return self.crf(self.proj(x), tags, mask=mask, reduction="mean")

    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 5:] = False
    return Net(), (torch.randn(3, 7, 6), torch.randint(0, 5, (3, 7)), mask)


# ptwt / torch-dct: transforms as layers
@_probe7("ptwt", input_grads=True, note="no weights: gradients of the input")
def wavedec_waverec():
    import ptwt

    class Net(torch.nn.Module):
        def forward(self, x):
            coeffs = ptwt.wavedec(x, "db2", level=2, mode="reflect")
            return ptwt.waverec(coeffs, "db2"), coeffs[0]

    return Net(), (torch.randn(2, 32),)


@_probe7("ptwt", input_grads=True, note="no weights: gradients of the input")
def wavedec2_haar():
    import ptwt

    class Net(torch.nn.Module):
        def forward(self, x):
            approx, *details = ptwt.wavedec2(x, "haar", level=2, mode="zero")
            return approx, [d for level in details for d in level]

    return Net(), (torch.randn(2, 16, 16),)


@_probe7("torch-dct")
def dct_layer():
    import torch_dct

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.dct = torch_dct.LinearDCT(8, "dct", norm="ortho")

        def forward(self, x):
            y = torch_dct.dct_2d(self.lin(x), norm="ortho")
            return torch_dct.idct(y), self.dct(x)

    return Net(), (torch.randn(2, 8, 8),)


# mixture-of-experts: top-2 gating with capacity, returns an auxiliary loss
@_probe7("mixture-of-experts", loss=lambda out: out[0].pow(2).mean() + out[1])
def moe_top2():
    from mixture_of_experts import MoE
    m = MoE(dim=16, num_experts=4, hidden_dim=32, second_policy_train="all",
            second_policy_eval="all")
    return m, (torch.randn(2, 6, 16),)


# BS-RoFormer: band-split rotary transformer over an STFT
@_probe7("BS-RoFormer")
def bs_roformer():
    from bs_roformer import BSRoformer
    m = BSRoformer(dim=16, depth=1, time_transformer_depth=1, freq_transformer_depth=1,
                   freqs_per_bands=(8, 9), dim_freqs_in=17, stft_n_fft=32, stft_hop_length=8,
                   stft_win_length=32, dim_head=8, heads=2, flash_attn=False,
                   num_residual_streams=1, mask_estimator_depth=1)
    return m, (torch.randn(2, 256),)


# --- the eighth held-out probe (group "probe-8") ---------------------------------------------
# geoopt (Riemannian manifolds: Poincaré-ball layers, ManifoldParameter), julius and
# asteroid-filterbanks (DSP: resampling, FFT convolutions, learned and STFT filterbanks),
# torchkbnufft (non-uniform FFT of complex images), nflows and FrEIA (normalizing flows,
# invertible nets), torchode (batched adaptive ODE solver), and lucidrains' lambda-networks,
# g-mlp-pytorch, mlp-mixer-pytorch, conformer, linformer, CoLT5-attention and MEGABYTE-pytorch.

def _probe8(library: str, **options):
    return register(library, group="probe-8", **options)


# geoopt: hyperbolic layers on the Poincaré ball
@_probe8("geoopt", note="Möbius matvec/add on a PoincareBall; a ManifoldParameter bias")
def poincare_mlp():
    import geoopt

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ball = geoopt.PoincareBall(c=1.0)
            self.weight = torch.nn.Parameter(torch.randn(6, 4) * 0.3)
            self.bias = geoopt.ManifoldParameter(self.ball.expmap0(torch.randn(6) * 0.1),
                                                 manifold=self.ball)

        def forward(self, x):
            h = self.ball.expmap0(x)
            h = self.ball.mobius_matvec(self.weight, h)
            h = self.ball.mobius_add(h, self.bias)
            return self.ball.logmap0(h), self.ball.dist0(h)

    return Net(), (torch.randn(5, 4) * 0.5,)


@_probe8("geoopt", note="Stiefel and sphere manifolds: projections and retractions")
def stiefel_sphere():
    import geoopt

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stiefel = geoopt.Stiefel()
            self.sphere = geoopt.Sphere()
            self.w = geoopt.ManifoldParameter(self.stiefel.random(6, 3), manifold=self.stiefel)
            self.lin = torch.nn.Linear(6, 6)

        def forward(self, x):
            u = self.stiefel.proju(self.w, self.lin(x).t() @ (x @ self.w))
            w = self.stiefel.retr(self.w, 0.1 * u)
            y = self.sphere.projx(x @ w)
            return y, self.sphere.inner(y, y, y)

    return Net(), (torch.randn(4, 6),)


# julius: resampling and FFT convolutions
@_probe8("julius", input_grads=True, note="fractional resampling and a low-pass filter bank")
def resample_lowpass():
    import julius

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.resample = julius.ResampleFrac(4, 5)
            self.lowpass = julius.LowPassFilters([0.1, 0.25])

        def forward(self, x):
            return self.lowpass(self.resample(x))

    return Net(), (torch.randn(2, 64),)


@_probe8("julius", note="FFT convolution and band splitting")
def fftconv_bands():
    import julius

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = julius.FFTConv1d(2, 3, 9, stride=2)
            self.bands = julius.SplitBands(sample_rate=16000, n_bands=3)

        def forward(self, x):
            return self.bands(self.conv(x))

    return Net(), (torch.randn(2, 2, 64),)


# asteroid-filterbanks: learned and STFT filterbanks, encoder/decoder pairs
@_probe8("asteroid-filterbanks", note="free (learned) filterbank: encode, mask, decode")
def free_enc_dec():
    from asteroid_filterbanks import make_enc_dec

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.dec = make_enc_dec("free", n_filters=16, kernel_size=8, stride=4)
            self.mask = torch.nn.Conv1d(16, 16, 1)

        def forward(self, x):
            w = self.enc(x)
            return self.dec(w * torch.sigmoid(self.mask(w)))

    return Net(), (torch.randn(2, 1, 64),)


@_probe8("asteroid-filterbanks", note="STFT filterbank magnitude; a parameterized sinc filterbank")
def stft_mag():
    from asteroid_filterbanks import STFTFB, Encoder, ParamSincFB
    from asteroid_filterbanks.transforms import mag

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stft = Encoder(STFTFB(n_filters=32, kernel_size=32, stride=8))
            self.sinc = Encoder(ParamSincFB(n_filters=8, kernel_size=33, stride=8))

        def forward(self, x):
            return mag(self.stft(x)), self.sinc(x)

    return Net(), (torch.randn(2, 1, 128),)


# torchkbnufft: non-uniform FFT (Kaiser-Bessel interpolation) of a complex image
@_probe8("torchkbnufft", input_grads=True,
         loss=lambda out: out.abs().pow(2).mean(), note="complex tensors; table interpolation")
def kbnufft():
    import torchkbnufft as tkbn

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.nufft = tkbn.KbNufft(im_size=(8, 8))

        def forward(self, image, omega):
            return self.nufft(image, omega)

    image = torch.randn(1, 1, 8, 8, dtype=torch.complex64)
    omega = (torch.rand(2, 20) * 2 - 1) * torch.pi
    return Net(), (image, omega)


# nflows / FrEIA: normalizing flows and invertible nets
@_probe8("nflows", loss=lambda out: -out.mean(), note="log_prob of a masked autoregressive flow")
def maf_log_prob():
    from nflows.flows import MaskedAutoregressiveFlow

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.flow = MaskedAutoregressiveFlow(features=3, hidden_features=8, num_layers=2,
                                                 num_blocks_per_layer=1,
                                                 batch_norm_between_layers=True)

        def forward(self, x):
            return self.flow.log_prob(x)

    return Net(), (torch.randn(6, 3),)


@_probe8("nflows", loss=lambda out: -out.mean(),
         note="rational-quadratic spline coupling over a permutation, log_prob")
def spline_coupling():
    from nflows import distributions, flows, transforms
    from nflows.nn.nets import ResidualNet

    def net(i, o):
        return ResidualNet(i, o, hidden_features=8, num_blocks=1)

    mask = torch.tensor([1, 0, 1, 0])
    t = transforms.CompositeTransform([
        transforms.PiecewiseRationalQuadraticCouplingTransform(
            mask, net, num_bins=4, tails="linear", tail_bound=3.0),
        transforms.ReversePermutation(4),
        transforms.AffineCouplingTransform(1 - mask, net)])
    flow = flows.Flow(t, distributions.StandardNormal([4]))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.flow = flow

        def forward(self, x):
            return self.flow.log_prob(x)

    return Net(), (torch.randn(5, 4),)


@_probe8("FrEIA", loss=lambda out: out[0].pow(2).mean() - out[1].mean(),
         note="SequenceINN of AllInOneBlocks: returns (z, log|det J|)")
def all_in_one_inn():
    import FrEIA.framework as Ff
    import FrEIA.modules as Fm

    def subnet(c_in, c_out):
        return torch.nn.Sequential(torch.nn.Linear(c_in, 16), torch.nn.ReLU(),
                                   torch.nn.Linear(16, c_out))

    inn = Ff.SequenceINN(4)
    for _ in range(2):
        inn.append(Fm.AllInOneBlock, subnet_constructor=subnet, permute_soft=True)
    return inn, (torch.randn(5, 4),)


@_probe8("FrEIA", loss=lambda out: out[0].pow(2).mean() - out[1].mean(),
         note="GraphINN of GLOW and RNVP coupling blocks")
def graph_inn():
    import FrEIA.framework as Ff
    import FrEIA.modules as Fm

    def subnet(c_in, c_out):
        return torch.nn.Sequential(torch.nn.Linear(c_in, 8), torch.nn.Tanh(),
                                   torch.nn.Linear(8, c_out))

    nodes = [Ff.InputNode(6, name="in")]
    nodes.append(Ff.Node(nodes[-1], Fm.GLOWCouplingBlock, {"subnet_constructor": subnet,
                                                           "clamp": 2.0}))
    nodes.append(Ff.Node(nodes[-1], Fm.PermuteRandom, {"seed": 0}))
    nodes.append(Ff.Node(nodes[-1], Fm.RNVPCouplingBlock, {"subnet_constructor": subnet}))
    nodes.append(Ff.OutputNode(nodes[-1], name="out"))
    return Ff.GraphINN(nodes), (torch.randn(5, 6),)


# torchode: a batched adaptive solver (one step size per sample, a while loop)
@_probe8("torchode", note="Dopri5 with a PID controller: data-dependent number of steps")
def torchode_dopri5():
    import torchode as to

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.field = torch.nn.Linear(3, 3)
            term = to.ODETerm(self.f)
            step = to.Dopri5(term=term)
            ctrl = to.IntegralController(atol=1e-4, rtol=1e-3, term=term)
            self.solver = to.AutoDiffAdjoint(step, ctrl)

        def f(self, t, y):
            return torch.tanh(self.field(y))

        def forward(self, y0):
            t_eval = torch.linspace(0, 1, 4).expand(y0.shape[0], 4)
            return self.solver.solve(to.InitialValueProblem(y0=y0, t_eval=t_eval)).ys

    return Net(), (torch.randn(2, 3),)


# lucidrains: lambda-networks, g-mlp-pytorch, mlp-mixer-pytorch, conformer, linformer,
# CoLT5-attention, MEGABYTE-pytorch
@_probe8("lambda-networks", note="lambda layer with a local (conv3d) position lambda")
def lambda_layer():
    from lambda_networks import LambdaLayer
    m = LambdaLayer(dim=16, dim_out=16, r=3, dim_k=8, heads=4, dim_u=2)
    return m, (torch.randn(2, 16, 6, 6),)


@_probe8("g-mlp-pytorch", note="spatial gating units with tiny attention")
def gmlp_lm():
    from g_mlp_pytorch import gMLP
    m = gMLP(num_tokens=64, dim=16, depth=2, seq_len=12, attn_dim=8, causal=True)
    return m, (_tokens(vocab=64, shape=(2, 12)),)


@_probe8("g-mlp-pytorch", note="vision gMLP, circulant spatial matrix")
def gmlp_vision():
    from g_mlp_pytorch import gMLPVision
    m = gMLPVision(image_size=16, patch_size=4, num_classes=5, dim=16, depth=2)
    return m, (torch.randn(2, 3, 16, 16),)


@_probe8("mlp-mixer-pytorch")
def mlp_mixer():
    from mlp_mixer_pytorch import MLPMixer
    m = MLPMixer(image_size=16, channels=3, patch_size=4, dim=16, depth=2, num_classes=5)
    return m, (torch.randn(2, 3, 16, 16),)


@_probe8("conformer", note="macaron feed-forwards, relative-position attention, depthwise conv")
def conformer_block():
    from conformer import Conformer
    m = Conformer(dim=16, depth=2, dim_head=8, heads=2, ff_mult=2, conv_expansion_factor=2,
                  conv_kernel_size=7, attn_dropout=0.0, ff_dropout=0.0, conv_dropout=0.0)
    return m, (torch.randn(2, 10, 16),)


@_probe8("linformer", note="sequence projected to k keys")
def linformer_lm():
    from linformer import LinformerLM
    m = LinformerLM(num_tokens=64, dim=16, seq_len=16, depth=2, k=8, heads=2, dim_head=8,
                    one_kv_head=True, share_kv=True)
    return m, (_tokens(vocab=64, shape=(2, 16)),)


@_probe8("CoLT5-attention", note="coordinate-descent top-k routing of heavy tokens")
def colt5_routed_ff():
    from colt5_attention import ConditionalRoutedFeedForward
    m = ConditionalRoutedFeedForward(dim=16, num_heavy_tokens=4, light_ff_mult=0.5,
                                     heavy_ff_mult=2)
    return m, (torch.randn(2, 12, 16),)


@_probe8("CoLT5-attention", note="routed attention: heavy queries and keys")
def colt5_routed_attention():
    from colt5_attention import ConditionalRoutedAttention
    m = ConditionalRoutedAttention(dim=16, num_heavy_tokens_q=4, num_heavy_tokens_kv=6,
                                   num_routed_kv=1, light_dim_head=8, light_heads=2,
                                   light_window_size=4, heavy_dim_head=8, heavy_heads=2,
                                   use_flash_attn=False)
    return m, (torch.randn(2, 12, 16),)


@_probe8("MEGABYTE-pytorch", loss=lambda out: out, note="multiscale byte LM, return_loss=True")
def megabyte():
    from MEGABYTE_pytorch import MEGABYTE

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = MEGABYTE(num_tokens=64, dim=(16, 8), depth=(1, 1), max_seq_len=(4, 4),
                               dim_head=8, heads=2, flash_attn=False)

        def forward(self, ids):
            return self.lm(ids, return_loss=True)

    return Net(), (torch.randint(0, 64, (2, 16)),)


# --- the ninth held-out probe (group "probe-9") ----------------------------------------------
# torchlibrosa (STFT as convolutions, log-mel), compressai (GDN, attention blocks, an entropy
# bottleneck's likelihoods), neuraloperator (FNO: spectral convolutions with complex
# weights), ncps (closed-form continuous-time and liquid time-constant cells, sparse
# wirings), tensorly-torch (CP / Tucker factorized linears, a tensor regression layer), and
# lucidrains' PaLM-pytorch, product_key_memory, block-recurrent-transformer-pytorch,
# taylor-series-linear-attention, gated-state-spaces-pytorch, x-mlps-pytorch and PoPE-pytorch.

def _probe9(library: str, **options):
    return register(library, group="probe-9", **options)


# torchlibrosa: spectrograms computed by conv1d with DFT kernels, a mel filter bank
@_probe9("torchlibrosa", note="conv-STFT power spectrogram, log-mel, a conv on top")
def logmel_cnn():
    from torchlibrosa.stft import LogmelFilterBank, Spectrogram

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.spec = Spectrogram(n_fft=32, hop_length=8, win_length=32)
            self.mel = LogmelFilterBank(sr=8000, n_fft=32, n_mels=8, fmin=0, fmax=4000)
            self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)

        def forward(self, x):
            return self.conv(self.mel(self.spec(x)))

    return Net(), (torch.randn(2, 128),)


# compressai: learned image compression
@_probe9("compressai", note="residual blocks with GDN, a strided and an upsampling block, "
                            "an attention block")
def residual_attention():
    _timm_libraries_importable()
    from compressai.layers import AttentionBlock, ResidualBlockUpsample, ResidualBlockWithStride

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.down = ResidualBlockWithStride(3, 8, stride=2)
            self.attn = AttentionBlock(8)
            self.up = ResidualBlockUpsample(8, 3, 2)

        def forward(self, x):
            return self.up(self.attn(self.down(x)))

    return Net(), (torch.randn(2, 3, 8, 8),)


@_probe9("compressai", note="FactorizedPrior analysis/synthesis; the entropy bottleneck's "
                            "rounding and likelihoods (training=False: no noise)")
def factorized_prior():
    _timm_libraries_importable()
    from compressai.models import FactorizedPrior

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = FactorizedPrior(N=8, M=8)

        def forward(self, x):
            y = self.model.g_a(x)
            y_hat, likelihoods = self.model.entropy_bottleneck(y, training=False)
            return self.model.g_s(y_hat), likelihoods

    return Net(), (torch.randn(2, 3, 16, 16),)


# neuraloperator: Fourier neural operator
@_probe9("neuraloperator", note="FNO: rfftn, complex weights on the low modes, irfftn")
def fno():
    from neuralop.models import FNO
    m = FNO(n_modes=(4, 4), hidden_channels=8, in_channels=1, out_channels=1, n_layers=2)
    return m, (torch.randn(2, 1, 8, 8),)


# ncps: continuous-time RNN cells unrolled over the sequence
@_probe9("ncps", note="closed-form continuous-time cell over a sequence; returns (y, h)")
def cfc():
    from ncps.torch import CfC
    return CfC(4, 8), (torch.randn(2, 5, 4),)


@_probe9("ncps", note="liquid time-constant cell on an AutoNCP sparse wiring (ODE unfolds)")
def ltc():
    from ncps.torch import LTC
    from ncps.wirings import AutoNCP
    return LTC(4, AutoNCP(10, 2)), (torch.randn(2, 5, 4),)


# tensorly-torch: factorized layers
@_probe9("tensorly-torch", note="CP and Tucker factorized linears (tensorly's backend system)")
def factorized_linear():
    import tltorch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = tltorch.FactorizedLinear(in_tensorized_features=(4, 4),
                                              out_tensorized_features=(2, 4),
                                              factorization="cp", rank=4)
            self.b = tltorch.FactorizedLinear(in_tensorized_features=(2, 4),
                                              out_tensorized_features=(2, 2),
                                              factorization="tucker", rank=0.5)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    return Net(), (torch.randn(3, 16),)


@_probe9("tensorly-torch", note="tensor regression layer with a Tucker weight")
def trl():
    import tltorch
    m = tltorch.TRL(input_shape=(4, 3, 3), output_shape=(5,), factorization="tucker", rank=0.5)
    return m, (torch.randn(2, 4, 3, 3),)


# lucidrains: PaLM-pytorch, product_key_memory, block-recurrent-transformer-pytorch,
# taylor-series-linear-attention, gated-state-spaces-pytorch, x-mlps-pytorch, PoPE-pytorch
@_probe9("PaLM-pytorch", note="parallel attention + SwiGLU blocks, rotary, multi-query")
def palm():
    from palm_pytorch import PaLM
    m = PaLM(num_tokens=64, dim=16, depth=2, dim_head=8, heads=2)
    return m, (_tokens(vocab=64, shape=(2, 12)),)


@_probe9("product_key_memory", note="product-key memory: two top-k's, an EmbeddingBag")
def pkm():
    from product_key_memory import PKM
    m = PKM(dim=16, heads=2, num_keys=8, topk=4, dim_head=8)
    return m, (torch.randn(2, 6, 16),)


@_probe9("block-recurrent-transformer-pytorch",
         note="recurrent state vectors across blocks; returns (logits, None, None)")
def block_recurrent():
    from block_recurrent_transformer_pytorch import BlockRecurrentTransformer
    m = BlockRecurrentTransformer(num_tokens=64, dim=16, depth=2, dim_head=8, heads=2,
                                  max_seq_len=32, block_width=8, num_state_vectors=4,
                                  recurrent_layers=(2,), use_flash_attn=False)
    return m, (_tokens(vocab=64, shape=(2, 16)),)


@_probe9("taylor-series-linear-attention", note="second-order Taylor feature map attention")
def taylor_attention():
    from taylor_series_linear_attention import TaylorSeriesLinearAttn
    m = TaylorSeriesLinearAttn(dim=16, dim_head=4, heads=2)
    return m, (torch.randn(2, 10, 16),)


@_probe9("gated-state-spaces-pytorch", note="gated diagonal state space: FFT convolution")
def gss():
    from gated_state_spaces_pytorch import GSS
    m = GSS(dim=16, dim_expansion_factor=2, dss_kernel_N=8, dss_kernel_H=16)
    return m, (torch.randn(2, 12, 16),)


@_probe9("x-mlps-pytorch", note="residual normed MLP; a grouped MLP")
def residual_mlp():
    import x_mlps_pytorch as X

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.res = X.ResidualNormedMLP(16, depth=4, residual_every=2, dim_in=8, dim_out=6)
            self.grouped = X.GroupedMLP(6, 12, 4, groups=2)

        def forward(self, x):
            return self.grouped(self.res(x))

    return Net(), (torch.randn(3, 8),)


@_probe9("PoPE-pytorch", note="polar positional embedding applied to q and k, then attention")
def pope_attention():
    from PoPE_pytorch import PoPE, apply_pope_to_qk

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pope = PoPE(dim=8, heads=2)
            self.qkv = torch.nn.Linear(16, 48)

        def forward(self, x):
            b, n, _ = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, 2, 8).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            q, k = apply_pope_to_qk(self.pope(n), q, k)
            return torch.softmax(q @ k.transpose(-1, -2) * 8 ** -0.5, -1) @ v

    return Net(), (torch.randn(2, 10, 16),)


# --- the tenth held-out probe (group "probe-10") ---------------------------------------------
# egnn-pytorch (E(n)-equivariant message passing over nearest neighbours), x-unet, byol-pytorch
# (a forward hook on a hidden layer, a lazily built projector and target), roma (rotation
# maps: quaternions, rotation vectors, Procrustes by SVD), pytorch-msssim (Gaussian-window
# SSIM), torch-struct (linear-chain CRF by semiring scans), sru (simple recurrent units, CPU
# path), and lucidrains' memory-efficient-attention-pytorch, FLASH-pytorch, mega-pytorch,
# deformable-attention, invariant-point-attention, halonet-pytorch and mogrifier.

def _probe10(library: str, **options):
    return register(library, group="probe-10", **options)


@_probe10("egnn-pytorch", note="EGNN network: k nearest neighbours by topk over distances, "
                               "coordinate updates")
def egnn_network():
    from egnn_pytorch import EGNN_Network
    m = EGNN_Network(num_tokens=10, dim=8, depth=2, num_nearest_neighbors=3, m_dim=8)
    return m, (torch.randint(0, 10, (2, 6)), torch.randn(2, 6, 3))


@_probe10("x-unet", note="a 2-D X-Unet: weight-standardised blocks, attention at the bottom")
def xunet():
    from x_unet import XUnet
    m = XUnet(dim=8, channels=3, dim_mults=(1, 2), num_blocks_per_stage=(1, 1),
              num_self_attn_per_stage=(0, 1), nested_unet_depths=(0, 0), attn_heads=2,
              attn_dim_head=8, weight_standardize=True)
    return m, (torch.randn(1, 3, 16, 16),)


@_probe10("byol-pytorch", note="BYOL's online encoder: a forward hook reads a hidden layer, "
                               "the projector is built on the first call")
def byol_online():
    _timm_libraries_importable()
    from byol_pytorch import BYOL

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(8, 4))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.byol = BYOL(net, image_size=16, hidden_layer=-2, projection_size=8,
                             projection_hidden_size=16, augment_fn=lambda x: x)

        def forward(self, x):
            return self.byol(x, return_embedding=True)

    m = Net()
    m.byol(torch.randn(2, 3, 16, 16), return_embedding=True)   # build the lazy projector
    return m, (torch.randn(2, 3, 16, 16),)


@_probe10("roma", input_grads=True, note="no weights: rotation-vector -> matrix -> unit "
                                         "quaternion, quaternion products, Procrustes (SVD)")
def rotations():
    import roma

    class Net(torch.nn.Module):
        def forward(self, rotvec, m):
            r = roma.rotvec_to_rotmat(rotvec)
            q = roma.rotmat_to_unitquat(r)
            q2 = roma.quat_product(q, roma.quat_conjugation(q.flip(0)))
            back = roma.unitquat_to_rotvec(roma.quat_normalize(q2))
            return back, roma.special_procrustes(m), roma.rotvec_composition([rotvec, back])

    return Net(), (torch.randn(5, 3), torch.randn(5, 3, 3))


@_probe10("pytorch-msssim", input_grads=True, note="no weights: SSIM with separable Gaussian "
                                                   "windows (conv2d per channel)")
def ssim():
    from pytorch_msssim import SSIM

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ssim = SSIM(data_range=1.0, channel=3, win_size=5)

        def forward(self, a, b):
            return 1 - self.ssim(a, b)

    return Net(), (torch.rand(2, 3, 16, 16), torch.rand(2, 3, 16, 16))


@_probe10("torch-struct", input_grads=True, note="no weights: a linear-chain CRF's log "
                                                 "partition and marginals (semiring scans)")
def linear_chain_crf():
    import torch_struct

    class Net(torch.nn.Module):
        def forward(self, log_potentials):
            dist = torch_struct.LinearChainCRF(log_potentials)
            return dist.partition, dist.marginals

    return Net(), (torch.randn(2, 5, 3, 3),)


@_probe10("sru", note="a two-layer bidirectional SRU, the pure-PyTorch CPU recurrence")
def sru():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sru import SRU
    m = SRU(8, 8, num_layers=2, bidirectional=True, layer_norm=True)
    return m, (torch.randn(5, 2, 8),)


@_probe10("memory-efficient-attention-pytorch", note="attention computed in query/key "
                                                     "buckets with checkpointed summaries")
def chunked_attention():
    from memory_efficient_attention_pytorch import Attention
    m = Attention(dim=16, heads=2, dim_head=8, causal=True, memory_efficient=True,
                  q_bucket_size=4, k_bucket_size=4)
    return m, (torch.randn(2, 12, 16),)


@_probe10("FLASH-pytorch", note="FLASH: gated attention units, grouped quadratic + linear "
                                "attention, rotary positions, token shift")
def flash_transformer():
    from flash_pytorch import FLASHTransformer
    m = FLASHTransformer(num_tokens=32, dim=16, depth=2, causal=True, group_size=4,
                         query_key_dim=8, shift_tokens=True)
    return m, (torch.randint(0, 32, (2, 12)),)


@_probe10("mega-pytorch", note="Mega: multi-headed damped EMA by FFT convolution, "
                               "single-headed gated attention")
def mega():
    from mega_pytorch import Mega
    m = Mega(num_tokens=32, dim=16, depth=2, ema_heads=4, attn_dim_qk=8, attn_dim_value=16)
    return m, (torch.randint(0, 32, (2, 10)),)


@_probe10("deformable-attention", note="2-D deformable attention: learned offsets, "
                                       "grid_sample, continuous position bias")
def deformable_attention_2d():
    from deformable_attention import DeformableAttention2D
    m = DeformableAttention2D(dim=16, dim_head=8, heads=2, downsample_factor=2,
                              offset_kernel_size=4)
    return m, (torch.randn(2, 16, 8, 8),)


@_probe10("invariant-point-attention", note="IPA blocks: points attended in local frames "
                                            "(rotations from Gram-Schmidt), a pairwise bias")
def ipa_blocks():
    from invariant_point_attention import IPABlock

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([
                IPABlock(dim=16, heads=2, scalar_key_dim=4, scalar_value_dim=4,
                         point_key_dim=2, point_value_dim=2, pairwise_repr_dim=4)
                for _ in range(2)])

        def forward(self, x, pairwise, frames, translations):
            rotations = torch.linalg.qr(frames).Q
            for block in self.blocks:
                x = block(x, pairwise_repr=pairwise, rotations=rotations,
                          translations=translations)
            return x

    return Net(), (torch.randn(2, 6, 16), torch.randn(2, 6, 6, 4), torch.randn(2, 6, 3, 3),
                   torch.randn(2, 6, 3))


@_probe10("halonet-pytorch", note="halo attention: blocked queries, unfolded haloed keys, "
                                  "relative logits")
def halo_attention():
    from halonet_pytorch import HaloAttention
    m = HaloAttention(dim=8, block_size=4, halo_size=1, dim_head=4, heads=2)
    return m, (torch.randn(2, 8, 8, 8),)


@_probe10("mogrifier", note="mogrifier gating of an LSTM cell's input and hidden state")
def mogrifier_lstm():
    from mogrifier import Mogrifier

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mogrify = Mogrifier(dim=8, iters=5, factorize_k=4)
            self.cell = torch.nn.LSTMCell(8, 8)

        def forward(self, xs, h, c):
            outs = []
            for x in xs.unbind(1):
                x, h = self.mogrify(x, h)
                h, c = self.cell(x, (h, c))
                outs.append(h)
            return torch.stack(outs, 1)

    return Net(), (torch.randn(2, 4, 8), torch.randn(2, 8), torch.randn(2, 8))


# --- the eleventh held-out probe (group "probe-11") ------------------------------------------
# Optimizers compiled as a user compiles them -- a module whose forward takes an optimizer's
# step() (the gradients came from a backward at build time) and then runs the stepped net --
# from lion-pytorch, schedulefree and pytorch-optimizer; ema-pytorch (an EMA of a model
# updated in the forward); torchcfm (conditional flow matching: sampled times and paths);
# x-clip; tensordict (TensorDictModule pipelines on a TensorDict built in the forward);
# native-sparse-attention-pytorch (compressed, selected and sliding-window branches);
# ring-attention-pytorch (one process); stable-baselines3 (actor-critic policies).

def _probe11(library: str, **options):
    return register(library, group="probe-11", **options)


class _StepThenForward(torch.nn.Module):
    """An optimizer's step() and then a forward of the stepped net: the gradients were left
    by a backward at build time, so every call (compiled or eager) steps from the same state."""

    def __init__(self, net, make_optimizer, x):
        super().__init__()
        self.net = net
        self.opt = make_optimizer(net.parameters())
        net(x).pow(2).mean().backward()

    def forward(self, x):
        self.opt.step()
        return self.net(x)


def _small_net():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


@_probe11("lion-pytorch", note="Lion's step (sign of interpolated momentum), then the forward")
def lion_step():
    from lion_pytorch import Lion
    x = torch.randn(5, 8)
    return _StepThenForward(_small_net(), lambda ps: Lion(ps, lr=1e-2, weight_decay=1e-2), x), (x,)


@_probe11("schedulefree", note="schedule-free AdamW's step (warmup, averaged iterate)")
def adamw_schedulefree_step():
    from schedulefree import AdamWScheduleFree
    x = torch.randn(5, 8)

    def make(ps):
        opt = AdamWScheduleFree(ps, lr=1e-2, warmup_steps=2)
        opt.train()
        return opt

    return _StepThenForward(_small_net(), make, x), (x,)


@_probe11("pytorch-optimizer", note="Lamb's step (trust ratio per parameter), then the forward")
def lamb_step():
    from pytorch_optimizer import Lamb
    x = torch.randn(5, 8)
    return _StepThenForward(_small_net(), lambda ps: Lamb(ps, lr=1e-2), x), (x,)


@_probe11("pytorch-optimizer", note="Ranger21's step (AdamW core, gradient centralisation, "
                                    "positive-negative momentum, warmup schedule)")
def ranger21_step():
    from pytorch_optimizer import Ranger21
    x = torch.randn(5, 8)
    return (_StepThenForward(_small_net(), lambda ps: Ranger21(ps, num_iterations=100, lr=1e-2),
                             x), (x,))


@_probe11("pytorch-optimizer", note="AdaBelief's step (rectified, weight-decoupled)")
def adabelief_step():
    from pytorch_optimizer import AdaBelief
    x = torch.randn(5, 8)
    return (_StepThenForward(_small_net(), lambda ps: AdaBelief(ps, lr=1e-2, rectify=True), x),
            (x,))


@_probe11("ema-pytorch", note="EMA(model): update() (a step counter buffer, lerp of every "
                              "parameter) and the EMA model's forward")
def ema_update():
    from ema_pytorch import EMA

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _small_net()
            self.ema = EMA(self.net, beta=0.9, update_after_step=0, update_every=1)

        def forward(self, x):
            self.ema.update()
            return self.ema(x) + self.net(x)

    return Net(), (torch.randn(5, 8),)


@_probe11("torchcfm", note="conditional flow matching: sampled time and path, an MLP vector "
                           "field, the regression target")
def flow_matching():
    from torchcfm.conditional_flow_matching import ExactOptimalTransportConditionalFlowMatcher
    from torchcfm.models import MLP

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fm = ExactOptimalTransportConditionalFlowMatcher(sigma=0.1)
            self.model = MLP(dim=2, w=16, time_varying=True)

        def forward(self, x0, x1):
            t, xt, ut = self.fm.sample_location_and_conditional_flow(x0, x1)
            vt = self.model(torch.cat([xt, t[:, None]], dim=-1))
            return (vt - ut).pow(2).mean(), vt

    return Net(), (torch.randn(8, 2), torch.randn(8, 2) + 2)


@_probe11("torchcfm", note="flow matching with a conditional path (sigma schedule) only")
def flow_matching_plain():
    from torchcfm.conditional_flow_matching import ConditionalFlowMatcher
    from torchcfm.models import MLP

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fm = ConditionalFlowMatcher(sigma=0.1)
            self.model = MLP(dim=2, w=16, time_varying=True)

        def forward(self, x0, x1):
            t, xt, ut = self.fm.sample_location_and_conditional_flow(x0, x1)
            return self.model(torch.cat([xt, t[:, None]], dim=-1)) - ut

    return Net(), (torch.randn(8, 2), torch.randn(8, 2) + 2)


@_probe11("x-clip", note="CLIP with a text transformer and a ViT: the contrastive loss in "
                          "training, the similarity logits in eval")
def x_clip():
    _timm_libraries_importable()
    from x_clip import CLIP

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.clip = CLIP(dim_text=16, dim_image=16, dim_latent=16, num_text_tokens=50,
                             text_enc_depth=1, text_seq_len=8, text_heads=2, text_dim_head=8,
                             visual_enc_depth=1, visual_image_size=16, visual_patch_size=8,
                             visual_heads=2, visual_dim_head=8, visual_patch_dropout=0.0)

        def forward(self, text, images):   # (the loss in training, the similarities else)
            return self.clip(text, images, return_loss=self.training)

    return Net(), (torch.randint(1, 50, (2, 8)), torch.randn(2, 3, 16, 16))


@_probe11("tensordict", note="TensorDictModule / TensorDictSequential on a TensorDict built "
                             "in the forward")
def tensordict_sequential():
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule, TensorDictSequential

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = TensorDictSequential(
                TensorDictModule(torch.nn.Linear(8, 16), in_keys=["x"], out_keys=["h"]),
                TensorDictModule(torch.nn.ReLU(), in_keys=["h"], out_keys=["h"]),
                TensorDictModule(torch.nn.Linear(16, 4), in_keys=["h"], out_keys=["y"]))

        def forward(self, x):
            td = TensorDict({"x": x}, batch_size=[x.shape[0]])
            out = self.seq(td)
            return out["y"], out.get("h")

    return Net(), (torch.randn(5, 8),)


@_probe11("native-sparse-attention-pytorch", note="NSA: compressed blocks, top-k selected "
                                                   "blocks, sliding window, gated combination")
def native_sparse_attention():
    from native_sparse_attention_pytorch import SparseAttention
    m = SparseAttention(dim=16, dim_head=8, heads=2, sliding_window_size=2,
                        compress_block_size=4, compress_block_sliding_stride=2,
                        selection_block_size=4, num_selected_blocks=2, causal=True)
    return m, (torch.randn(2, 16, 16),)


@_probe11("ring-attention-pytorch", note="ring attention on one process: the bucketed "
                                          "flash-attention autograd.Function in PyTorch")
def ring_attention():
    from ring_attention_pytorch import RingAttention
    m = RingAttention(dim=16, dim_head=8, heads=2, causal=True, bucket_size=4,
                      rotary_embed=True, use_cuda_kernel=False)
    return m, (torch.randn(2, 12, 16),)


@_probe11("stable-baselines3", note="an actor-critic policy's evaluate_actions: features, "
                                    "MLP extractor, Gaussian log-probabilities, entropy")
def sb3_policy():
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.policies import ActorCriticPolicy

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            space = gym.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
            actions = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
            self.policy = ActorCriticPolicy(space, actions, lambda _: 1e-3,
                                            net_arch=dict(pi=[16], vf=[16]))

        def forward(self, obs, act):
            values, log_prob, entropy = self.policy.evaluate_actions(obs, act)
            return values, log_prob, entropy

    return Net(), (torch.randn(5, 4), torch.randn(5, 2))


@_probe11("stable-baselines3", note="a discrete-action policy's deterministic forward "
                                    "(argmax), values and log-probabilities")
def sb3_discrete_policy():
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.policies import ActorCriticPolicy

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            space = gym.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
            self.policy = ActorCriticPolicy(space, gym.spaces.Discrete(3), lambda _: 1e-3,
                                            net_arch=[16])

        def forward(self, obs):
            actions, values, log_prob = self.policy(obs, deterministic=True)
            return actions, values, log_prob

    return Net(), (torch.randn(5, 4),)
