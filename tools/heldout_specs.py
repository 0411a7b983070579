"""The held-out corpus of tools/capture_heldout.py: model files from public repositories,
each case a class (or factory) of one file (vit-pytorch's here, the other repositories' in
heldout_specs_more.py), built with small constructor arguments taken from
the repository's README usage, and its inputs.

A case is `Case(name, repo, module, build, inputs)`: `module` is the dotted module inside the
checkout `<root>/<owner>+<name>`, `build(M)` makes the model from the loaded module `M`, and
`inputs` describes the positional arguments: `R(*shape)` floats, `I(vocab, *shape)` token
ids, `B(*shape)` a boolean mask, `K(value)` a constant passed as is. `call` names a method
to call instead of `forward`; `kw` passes the last arguments by keyword.
"""
from importlib import import_module as imp
from typing import Callable, NamedTuple

import torch
from torch import nn

# Repositories, as fetched by `python tools/capture_heldout.py --fetch` (git mirror or clone
# by URL; only the *.py files are extracted).
REPOS = [
    "lucidrains/vit-pytorch", "karpathy/nanoGPT", "karpathy/minGPT",
    "facebookresearch/segment-anything", "openai/CLIP", "openai/whisper",
    "lucidrains/x-transformers", "lucidrains/perceiver-pytorch",
    "lucidrains/mixture-of-experts", "lucidrains/MEGABYTE-pytorch", "facebookresearch/dinov2",
    "kuangliu/pytorch-cifar", "lucidrains/conformer", "lucidrains/mlp-mixer-pytorch",
    "lucidrains/g-mlp-pytorch", "lucidrains/nystrom-attention", "lucidrains/lambda-networks",
    "lucidrains/axial-attention", "lukemelas/EfficientNet-PyTorch", "pytorch/examples",
    "lucidrains/reformer-pytorch", "lucidrains/performer-pytorch", "lucidrains/res-mlp-pytorch",
    "lucidrains/siren-pytorch", "lucidrains/bottleneck-transformer-pytorch",
    "lucidrains/memory-efficient-attention-pytorch", "lucidrains/h-transformer-1d",
    "lucidrains/linear-attention-transformer", "openai/guided-diffusion", "milesial/Pytorch-UNet",
    "lucidrains/TimeSformer-pytorch", "lucidrains/vector-quantize-pytorch",
    "CompVis/stable-diffusion",
]
# pip packages some of them import: `pip install einops einx numba omegaconf loguru beartype tiktoken
# local-attention product-key-memory axial-positional-embedding rotary-embedding-torch linformer`.


class Case(NamedTuple):
    name: str
    repo: str
    module: str
    build: Callable
    inputs: tuple
    call: str = ""
    kw: tuple = ()


def R(*shape):
    return ("randn", shape)


def I(vocab, *shape):  # noqa: E743 - token ids
    return ("ids", shape, vocab)


def B(*shape):
    return ("mask", shape)


def K(value):
    return ("const", value)


CASES = []


def case(name, repo, module, build, *inputs, call="", kw=()):
    CASES.append(Case(name, repo, module, build, inputs, call, kw))


# -- lucidrains/vit-pytorch ---------------------------------------------------------------------
VP = "lucidrains/vit-pytorch"
V = dict(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2, heads=2, mlp_dim=64,
         dim_head=16)
IMG = R(2, 3, 32, 32)


def vit(name, mod, cls, extra=(), drop=(), inp=IMG, **more):
    kw = {k: v for k, v in V.items() if k not in drop}
    kw.update(dict(extra), **more)
    case(name, VP, f"vit_pytorch.{mod}", lambda M, cls=cls, kw=kw: getattr(M, cls)(**kw), inp)


vit("vit", "vit", "ViT")
vit("vit_mean_pool", "vit", "ViT", pool="mean", dropout=0.1, emb_dropout=0.1)
vit("simple_vit", "simple_vit", "SimpleViT")
vit("deepvit", "deepvit", "DeepViT")
vit("cait", "cait", "CaiT", cls_depth=1, layer_dropout=0.05)
vit("parallel_vit", "parallel_vit", "ViT", num_parallel_branches=2)
vit("vit_small_dataset", "vit_for_small_dataset", "ViT")
vit("vit_patch_merger", "vit_with_patch_merger", "ViT", patch_merge_layer=1,
    patch_merge_num_tokens=4)
vit("vit_patch_dropout", "vit_with_patch_dropout", "ViT")
vit("vit_decorr", "vit_with_decorr", "ViT", decorr_dim_subspace=8)
vit("vit_keel_post_ln", "vit_with_keel_post_ln", "ViT")
vit("vit_detpool", "vit_detpool", "ViTDetPool")
vit("ats_vit", "ats_vit", "ViT", max_tokens_per_depth=(12, 6))
vit("rvt", "rvt", "RvT")
vit("nvit", "normalized_vit", "nViT")
vit("jumbo_vit", "jumbo_vit", "JumboViT")
vit("jet_vit", "jet_vit", "JetViT", window_size=2)
vit("simple_uvit", "simple_uvit", "SimpleUViT", num_register_tokens=2)
vit("simple_vit_attn_residual", "simple_vit_attn_residual", "SimpleViTAttnResidual")
vit("simple_vit_orthog", "simple_vit_orthog_residual_update", "SimpleViT")
vit("simple_vit_fft", "simple_vit_with_fft", "SimpleViT", freq_patch_size=8)
vit("simple_vit_hyper", "simple_vit_with_hyper_connections", "SimpleViT",
    num_residual_streams=2)
vit("simple_vit_patch_dropout", "simple_vit_with_patch_dropout", "SimpleViT")
vit("simple_vit_qk_norm", "simple_vit_with_qk_norm", "SimpleViT")
vit("simple_vit_registers", "simple_vit_with_register_tokens", "SimpleViT",
    num_register_tokens=2)
vit("simple_vit_specialized_cls", "simple_vit_with_specialized_cls", "SimpleViT")
vit("simple_vit_value_residual", "simple_vit_with_value_residual", "SimpleViT")
vit("simple_flash_attn_vit", "simple_flash_attn_vit", "SimpleViT")
vit("vit_1d", "vit_1d", "ViT", drop=("image_size",), seq_len=64, inp=R(2, 3, 64))
vit("simple_vit_1d", "simple_vit_1d", "SimpleViT", drop=("image_size",), seq_len=64,
    inp=R(2, 3, 64))
vit("vit_3d", "vit_3d", "ViT", drop=("patch_size",), frames=4, image_patch_size=8,
    frame_patch_size=2, inp=R(1, 3, 4, 32, 32))
vit("simple_vit_3d", "simple_vit_3d", "SimpleViT", drop=("patch_size",), frames=4,
    image_patch_size=8, frame_patch_size=2, inp=R(1, 3, 4, 32, 32))
vit("simple_flash_attn_vit_3d", "simple_flash_attn_vit_3d", "SimpleViT", drop=("patch_size",),
    frames=4, image_patch_size=8, frame_patch_size=2, inp=R(1, 3, 4, 32, 32))
vit("vivit", "vivit", "ViViT", drop=("patch_size", "depth"), frames=4, image_patch_size=8,
    frame_patch_size=2, spatial_depth=1, temporal_depth=1, inp=R(1, 3, 4, 32, 32))
vit("vivit_factorized_attn", "vivit", "ViViT", drop=("patch_size", "depth"), frames=4,
    image_patch_size=8, frame_patch_size=2, spatial_depth=1, temporal_depth=1,
    variant="factorized_self_attention", inp=R(1, 3, 4, 32, 32))
vit("vivit_moss", "vivit_with_moss", "ViViT", drop=("patch_size", "depth"), frames=4,
    image_patch_size=8, frame_patch_size=2, spatial_depth=1, temporal_depth=1,
    moss_hidden_dim=8, use_flash_attn=False, inp=R(1, 3, 4, 32, 32))
vit("vit_nd", "vit_nd", "ViTND", drop=("image_size",), ndim=2, input_shape=(32, 32))
vit("vit_nd_rotary", "vit_nd_rotary", "ViTND", drop=("image_size",), ndim=2,
    input_shape=(32, 32))
vit("vit_nd_pope", "vit_nd_pope", "ViTND", drop=("image_size",), ndim=2, input_shape=(32, 32))
vit("na_vit", "na_vit", "NaViT", drop=(), token_dropout_prob=0.1)
vit("wwt", "wwt", "WWT", drop=("mlp_dim",), num_slots=4)
vit("look_vit", "look_vit", "LookViT", drop=("mlp_dim",), highres_patch_size=4,
    cross_attn_heads=2, cross_attn_dim_head=16, patch_conv_kernel_size=3, image_size=32,
    patch_size=8)
vit("t2t", "t2t", "T2TViT", drop=("patch_size",), t2t_layers=((7, 4), (3, 2)))
vit("pit", "pit", "PiT", depth=(1, 1), patch_size=8)
vit("xcit", "xcit", "XCiT", cls_depth=1, layer_dropout=0.05, local_patch_kernel_size=3)
vit("cct", "cct", "CCT", drop=tuple(V), img_size=32, embedding_dim=32, n_conv_layers=1,
    kernel_size=3, stride=1, padding=1, pooling_kernel_size=3, pooling_stride=2,
    pooling_padding=1, num_layers=2, num_heads=2, mlp_ratio=2., num_classes=10)
vit("cct_sine", "cct", "CCT", drop=tuple(V), img_size=32, embedding_dim=32, n_conv_layers=2,
    num_layers=1, num_heads=2, num_classes=10, positional_embedding="sine")
vit("cct_3d", "cct_3d", "CCT", drop=tuple(V), img_size=32, num_frames=4, embedding_dim=32,
    n_conv_layers=1, frame_kernel_size=3, kernel_size=3, stride=1, padding=1,
    pooling_kernel_size=3, pooling_stride=2, pooling_padding=1, num_layers=1, num_heads=2,
    mlp_ratio=2., num_classes=10, inp=R(1, 3, 4, 32, 32))
vit("cross_vit", "cross_vit", "CrossViT", drop=tuple(V), image_size=32, num_classes=10,
    depth=1, sm_dim=32, sm_patch_size=8, sm_enc_depth=1, sm_enc_heads=2, sm_enc_mlp_dim=64,
    lg_dim=48, lg_patch_size=16, lg_enc_depth=1, lg_enc_heads=2, lg_enc_mlp_dim=64,
    cross_attn_depth=1, cross_attn_heads=2)
vit("levit", "levit", "LeViT", drop=tuple(V), image_size=64, num_classes=10, stages=2,
    dim=(32, 48), depth=1, heads=(2, 3), mlp_mult=2, inp=R(2, 3, 64, 64))
vit("cvt", "cvt", "CvT", drop=tuple(V), num_classes=10, s1_emb_dim=16, s1_depth=1,
    s2_emb_dim=32, s2_heads=2, s2_depth=1, s3_emb_dim=48, s3_heads=2, s3_depth=1)
vit("twins_svt", "twins_svt", "TwinsSVT", drop=tuple(V), num_classes=10, s1_emb_dim=16,
    s1_patch_size=4, s1_local_patch_size=2, s1_global_k=2, s1_depth=1, s2_emb_dim=32,
    s2_patch_size=2, s2_local_patch_size=2, s2_global_k=2, s2_depth=1, s3_emb_dim=32,
    s3_patch_size=1, s3_local_patch_size=2, s3_global_k=2, s3_depth=1, s4_emb_dim=32,
    s4_patch_size=1, s4_local_patch_size=2, s4_global_k=2, s4_depth=1)
vit("regionvit", "regionvit", "RegionViT", drop=tuple(V), dim=(16, 32, 32, 32),
    depth=(1, 1, 1, 1), window_size=7, num_classes=10, inp=R(1, 3, 224, 224))
vit("crossformer", "crossformer", "CrossFormer", drop=tuple(V), num_classes=10,
    dim=(32, 64, 64, 64), depth=(1, 1, 1, 1), global_window_size=(2, 2, 1, 1),
    local_window_size=2, inp=R(1, 3, 64, 64))
vit("scalable_vit", "scalable_vit", "ScalableViT", drop=tuple(V), num_classes=10, dim=16,
    heads=(1, 2, 2, 2), depth=(1, 1, 1, 1), ssa_dim_key=(8, 8, 8, 8),
    reduction_factor=(4, 2, 1, 1), window_size=(4, 2, None, None), inp=R(1, 3, 64, 64))
vit("sep_vit", "sep_vit", "SepViT", drop=tuple(V), num_classes=10, dim=16, dim_head=8,
    heads=(1, 2, 2, 2), depth=(1, 1, 1, 1), inp=R(1, 3, 224, 224))
vit("max_vit", "max_vit", "MaxViT", drop=tuple(V), num_classes=10, dim_conv_stem=16, dim=16,
    dim_head=8, depth=(1, 1), window_size=2, inp=R(2, 3, 32, 32))
vit("max_vit_registers", "max_vit_with_registers", "MaxViT", drop=tuple(V), num_classes=10,
    dim_conv_stem=16, dim=16, dim_head=8, depth=(1, 1), window_size=2,
    num_register_tokens=2, inp=R(2, 3, 32, 32))
vit("nest", "nest", "NesT", drop=("mlp_dim", "depth", "dim_head"), heads=2,
    num_hierarchies=2, block_repeats=(1, 1), patch_size=4)
vit("mobile_vit", "mobile_vit", "MobileViT", drop=tuple(V), image_size=(64, 64),
    dims=[16, 16, 16], channels=[8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 32], num_classes=10,
    inp=R(1, 3, 64, 64))
case("mp3", VP, "vit_pytorch.mp3", lambda M: M.MP3(vit=M.ViT(**V), masking_ratio=0.75), IMG)
case("patch_merger", VP, "vit_pytorch.vit_with_patch_merger",
     lambda M: M.PatchMerger(dim=32, num_tokens_out=4), R(2, 16, 32))
case("spt", VP, "vit_pytorch.vit_for_small_dataset",
     lambda M: M.SPT(dim=32, patch_size=8, channels=3), IMG)
case("learnable_memory_adapter", VP, "vit_pytorch.learnable_memory_vit",
     lambda M: M.Adapter(vit=M.ViT(**V), num_classes=2, num_memories_per_layer=2), IMG)
case("recorder", VP, "vit_pytorch.recorder",
     lambda M: M.Recorder(imp("vit_pytorch.vit").ViT(**V)), IMG)
case("extractor", VP, "vit_pytorch.extractor",
     lambda M: M.Extractor(imp("vit_pytorch.vit").ViT(**V)), IMG)
case("efficient", VP, "vit_pytorch.efficient", lambda M: M.ViT(
    image_size=32, patch_size=8, num_classes=10, dim=32,
    transformer=nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 2, 64, batch_first=True),
                                      2)), IMG)
case("distill", VP, "vit_pytorch.distill", lambda M: M.DistillWrapper(
    student=M.DistillableViT(**V), teacher=nn.Sequential(nn.Flatten(), nn.Linear(3072, 10)),
    temperature=3, alpha=0.5), IMG, I(10, 2))
