"""The held-out corpus of tools/capture_heldout.py: model files from public repositories,
each case a class (or factory) of one file, built with small constructor arguments taken from
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
    "lucidrains/linear-attention-transformer",
]
# pip packages some of them import: `pip install einops loguru beartype tiktoken
# local-attention product-key-memory axial-positional-embedding`.


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

# -- GPTs: karpathy/nanoGPT, karpathy/minGPT ---------------------------------------------------
case("nanogpt", "karpathy/nanoGPT", "model", lambda M: M.GPT(M.GPTConfig(
    block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True)),
    I(64, 2, 16))
case("nanogpt_loss", "karpathy/nanoGPT", "model", lambda M: M.GPT(M.GPTConfig(
    block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.1, bias=False)),
    I(64, 2, 16), I(64, 2, 16))


def _mingpt(M, model_type=None):
    cfg = M.GPT.get_default_config()
    cfg.model_type, cfg.vocab_size, cfg.block_size = model_type, 64, 16
    if model_type is None:
        cfg.n_layer, cfg.n_head, cfg.n_embd = 2, 2, 32
    return M.GPT(cfg)


case("mingpt", "karpathy/minGPT", "mingpt.model", _mingpt, I(64, 2, 16))
case("mingpt_nano_loss", "karpathy/minGPT", "mingpt.model",
     lambda M: _mingpt(M, "gpt-nano"), I(64, 2, 16), I(64, 2, 16))

# -- facebookresearch/segment-anything ----------------------------------------------------------
SA = "facebookresearch/segment-anything"
case("sam_image_encoder", SA, "segment_anything.modeling.image_encoder",
     lambda M: M.ImageEncoderViT(img_size=64, patch_size=16, embed_dim=32, depth=2,
                                 num_heads=2, out_chans=16, window_size=2,
                                 global_attn_indexes=(1,), use_rel_pos=True), R(1, 3, 64, 64))
case("sam_two_way_transformer", SA, "segment_anything.modeling.transformer",
     lambda M: M.TwoWayTransformer(depth=2, embedding_dim=32, num_heads=2, mlp_dim=64),
     R(1, 32, 4, 4), R(1, 32, 4, 4), R(1, 5, 32))
case("sam_prompt_encoder", SA, "segment_anything.modeling.prompt_encoder",
     lambda M: M.PromptEncoder(embed_dim=32, image_embedding_size=(4, 4),
                               input_image_size=(64, 64), mask_in_chans=8),
     K(None), R(1, 2, 2), R(1, 1, 16, 16))


class _MaskDecoder(nn.Module):
    """SAM's mask decoder as its predictor calls it (position encoding from the prompt
    encoder's), with multimask output."""

    def __init__(self, M):
        super().__init__()
        T = imp("segment_anything.modeling.transformer")
        self.dec = M.MaskDecoder(transformer_dim=32, transformer=T.TwoWayTransformer(
            depth=2, embedding_dim=32, num_heads=2, mlp_dim=64), iou_head_hidden_dim=32)

    def forward(self, emb, pe, sparse, dense):
        return self.dec(emb, pe, sparse, dense, multimask_output=True)


case("sam_mask_decoder", SA, "segment_anything.modeling.mask_decoder", _MaskDecoder,
     R(1, 32, 4, 4), R(1, 32, 4, 4), R(1, 3, 32), R(1, 32, 4, 4))

# -- openai/CLIP, openai/whisper ------------------------------------------------------------------
CL = dict(embed_dim=32, context_length=16, vocab_size=100, transformer_width=32,
          transformer_heads=2, transformer_layers=2)
case("clip_vit", "openai/CLIP", "clip.model", lambda M: M.CLIP(
    image_resolution=32, vision_layers=2, vision_width=64, vision_patch_size=8, **CL),
    IMG, I(100, 2, 16))
case("clip_resnet", "openai/CLIP", "clip.model", lambda M: M.CLIP(
    image_resolution=64, vision_layers=(1, 1, 1, 1), vision_width=16, vision_patch_size=None,
    **CL), R(2, 3, 64, 64), I(100, 2, 16))
case("clip_encode_text", "openai/CLIP", "clip.model", lambda M: M.CLIP(
    image_resolution=32, vision_layers=1, vision_width=64, vision_patch_size=8, **CL),
    I(100, 2, 16), call="encode_text")
WD = dict(n_mels=16, n_audio_ctx=8, n_audio_state=32, n_audio_head=2, n_audio_layer=1,
          n_vocab=100, n_text_ctx=8, n_text_state=32, n_text_head=2, n_text_layer=1)


def _whisper(M):
    m = M.Whisper(M.ModelDimensions(**WD))
    # torch.empty in the constructor (a checkpoint fills it): the same values in every copy
    nn.init.normal_(m.decoder.positional_embedding, std=0.02)
    return m


case("whisper", "openai/whisper", "whisper.model", _whisper, R(1, 16, 16), I(100, 1, 8))
case("whisper_encoder", "openai/whisper", "whisper.model", lambda M: _whisper(M).encoder,
     R(2, 16, 16))

# -- lucidrains/x-transformers --------------------------------------------------------------------
XT = "lucidrains/x-transformers"


def _xt(kind, **attn):
    def build(M):
        layers = getattr(M, kind)(dim=32, depth=2, heads=2, attn_dim_head=16, **attn)
        return M.TransformerWrapper(num_tokens=100, max_seq_len=16, attn_layers=layers)
    return build


case("xt_decoder", XT, "x_transformers.x_transformers", _xt("Decoder"), I(100, 2, 16))
case("xt_encoder", XT, "x_transformers.x_transformers", _xt("Encoder"), I(100, 2, 16))
case("xt_decoder_rotary_glu", XT, "x_transformers.x_transformers",
     _xt("Decoder", rotary_pos_emb=True, ff_glu=True, attn_qk_norm=True), I(100, 2, 16))
case("xt_decoder_alibi_sandwich", XT, "x_transformers.x_transformers",
     _xt("Decoder", alibi_pos_bias=True, sandwich_norm=True, residual_attn=True),
     I(100, 2, 16))
case("xt_vit", XT, "x_transformers.x_transformers", lambda M: M.ViTransformerWrapper(
    image_size=32, patch_size=8, num_classes=10,
    attn_layers=M.Encoder(dim=32, depth=2, heads=2, attn_dim_head=16)), IMG)
case("xt_continuous", XT, "x_transformers.continuous", lambda M: M.ContinuousTransformerWrapper(
    dim_in=8, dim_out=8, max_seq_len=16, attn_layers=imp("x_transformers.x_transformers")
    .Encoder(dim=32, depth=2, heads=2, attn_dim_head=16)), R(2, 16, 8))
case("xt_encdec", XT, "x_transformers.x_transformers", lambda M: M.XTransformer(
    dim=32, enc_num_tokens=100, enc_depth=1, enc_heads=2, enc_max_seq_len=16,
    dec_num_tokens=100, dec_depth=1, dec_heads=2, dec_max_seq_len=16, tie_token_emb=True),
    I(100, 2, 16), I(100, 2, 8), B(2, 16))
case("xt_autoregressive_loss", XT, "x_transformers.autoregressive_wrapper",
     lambda M: M.AutoregressiveWrapper(_xt("Decoder")(imp("x_transformers.x_transformers"))),
     I(100, 2, 16))

# -- perceivers, MoE, MEGABYTE ------------------------------------------------------------------
PP = "lucidrains/perceiver-pytorch"
PK = dict(depth=2, num_latents=16, latent_dim=32, cross_heads=1, latent_heads=2,
          cross_dim_head=16, latent_dim_head=16)
case("perceiver", PP, "perceiver_pytorch.perceiver_pytorch", lambda M: M.Perceiver(
    input_channels=3, input_axis=2, num_freq_bands=6, max_freq=10., num_classes=10, **PK),
    R(2, 16, 16, 3))
case("perceiver_io", PP, "perceiver_pytorch.perceiver_io", lambda M: M.PerceiverIO(
    dim=32, queries_dim=24, logits_dim=10, **PK), R(2, 16, 32), B(2, 16), R(2, 8, 24),
    kw=("mask", "queries"))
case("perceiver_lm", PP, "perceiver_pytorch.perceiver_io", lambda M: M.PerceiverLM(
    num_tokens=100, dim=32, max_seq_len=16, **PK), I(100, 2, 16))
case("perceiver_mixed_latents", PP, "perceiver_pytorch.mixed_latents", lambda M: M.Perceiver(
    input_channels=3, input_axis=2, num_freq_bands=6, max_freq=10., num_classes=10,
    latent_dim=32, num_latents=16, cross_heads=1, latent_heads=2, cross_dim_head=16,
    latent_dim_head=16, depth=2), R(2, 16, 16, 3))
MOE = "lucidrains/mixture-of-experts"
case("moe", MOE, "mixture_of_experts.mixture_of_experts",
     lambda M: M.MoE(dim=32, num_experts=4, hidden_dim=64), R(2, 16, 32))
case("moe_hierarchical", MOE, "mixture_of_experts.mixture_of_experts",
     lambda M: M.HeirarchicalMoE(dim=32, num_experts=(2, 2)), R(2, 16, 32))
case("megabyte", "lucidrains/MEGABYTE-pytorch", "MEGABYTE_pytorch.megabyte",
     lambda M: M.MEGABYTE(num_tokens=64, dim=(32, 16), max_seq_len=(8, 4), depth=(1, 1),
                          dim_head=16, heads=2, flash_attn=False), I(64, 1, 8, 4))
case("megabyte_loss", "lucidrains/MEGABYTE-pytorch", "MEGABYTE_pytorch.megabyte",
     lambda M: M.MEGABYTE(num_tokens=64, dim=(32, 16), max_seq_len=(8, 4), depth=(1, 1),
                          dim_head=16, heads=2, flash_attn=False),
     I(64, 1, 8, 4), K(True), kw=("return_loss",))

# -- facebookresearch/dinov2 ----------------------------------------------------------------------
DN = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2)
case("dinov2_vit", "facebookresearch/dinov2", "dinov2.models.vision_transformer",
     lambda M: M.DinoVisionTransformer(**DN), IMG)
case("dinov2_registers_swiglu", "facebookresearch/dinov2", "dinov2.models.vision_transformer",
     lambda M: M.DinoVisionTransformer(num_register_tokens=2, ffn_layer="swiglu",
                                       init_values=1e-5, **DN), IMG)
case("dinov2_features", "facebookresearch/dinov2", "dinov2.models.vision_transformer",
     lambda M: M.DinoVisionTransformer(**DN), IMG, call="forward_features")
case("dinov2_head", "facebookresearch/dinov2", "dinov2.layers.dino_head",
     lambda M: M.DINOHead(in_dim=32, out_dim=64, hidden_dim=48, bottleneck_dim=16),
     R(4, 32))

# -- kuangliu/pytorch-cifar -----------------------------------------------------------------------
for _mod, _make in [("lenet", "LeNet()"), ("vgg", "VGG('VGG11')"), ("resnet", "ResNet18()"),
                    ("preact_resnet", "PreActResNet18()"), ("googlenet", "GoogLeNet()"),
                    ("densenet", "densenet_cifar()"), ("resnext", "ResNeXt29_2x64d()"),
                    ("mobilenet", "MobileNet()"), ("mobilenetv2", "MobileNetV2()"),
                    ("dpn", "DPN26()"),
                    ("senet", "SENet18()"), ("shufflenetv2", "ShuffleNetV2(0.5)"),
                    ("efficientnet", "EfficientNetB0()"), ("regnet", "RegNetX_200MF()"),
                    ("dla_simple", "SimpleDLA()"), ("dla", "DLA()"), ("pnasnet", "PNASNetA()")]:
    case(f"cifar_{_mod}", "kuangliu/pytorch-cifar", f"models.{_mod}",
         lambda M, e=_make: eval(e, vars(M)), R(2, 3, 32, 32))  # noqa: S307 - a README name

# -- lukemelas/EfficientNet-PyTorch, pytorch/examples ---------------------------------------------
EN = "lukemelas/EfficientNet-PyTorch"
case("efficientnet_b0", EN, "efficientnet_pytorch.model",
     lambda M: M.EfficientNet.from_name("efficientnet-b0", image_size=32, num_classes=10),
     R(2, 3, 32, 32))


def _effnet_plain_swish(M):
    m = M.EfficientNet.from_name("efficientnet-b0", image_size=32, num_classes=10)
    m.set_swish(memory_efficient=False)
    return m


case("efficientnet_b0_plain_swish", EN, "efficientnet_pytorch.model", _effnet_plain_swish,
     R(2, 3, 32, 32))
case("efficientnet_features", EN, "efficientnet_pytorch.model",
     lambda M: M.EfficientNet.from_name("efficientnet-b0", image_size=32),
     R(2, 3, 32, 32), call="extract_endpoints")
PE = "pytorch/examples"


class _WordLM(nn.Module):
    """word_language_model's RNNModel as its training loop calls it: (input, hidden), the
    hidden state from init_hidden (sequence-first input)."""

    def __init__(self, M, kind):
        super().__init__()
        self.m = M.RNNModel(kind, 50, 16, 16, 2, dropout=0.2, tie_weights=True)

    def forward(self, ids):
        return self.m(ids, self.m.init_hidden(ids.shape[1]))


case("word_lm_lstm", PE, "word_language_model/model", lambda M: _WordLM(M, "LSTM"),
     I(50, 8, 2))
case("word_lm_gru", PE, "word_language_model/model", lambda M: _WordLM(M, "GRU"), I(50, 8, 2))
case("word_lm_rnn_tanh", PE, "word_language_model/model", lambda M: _WordLM(M, "RNN_TANH"),
     I(50, 8, 2))
case("word_lm_transformer", PE, "word_language_model/model",
     lambda M: M.TransformerModel(50, 16, 2, 32, 2, dropout=0.2), I(50, 8, 2))
case("super_resolution", PE, "super_resolution/model", lambda M: M.Net(upscale_factor=2),
     R(1, 1, 16, 16))
case("fast_neural_style", PE, "fast_neural_style/neural_style/transformer_net",
     lambda M: M.TransformerNet(), R(1, 3, 32, 32))

# -- lucidrains: attention variants, MLPs, conformer --------------------------------------------
L = "lucidrains/"
case("conformer", L + "conformer", "conformer.conformer",
     lambda M: M.Conformer(dim=32, depth=2, dim_head=16, heads=2, ff_mult=2,
                           conv_kernel_size=7), R(2, 16, 32))
case("conformer_block_mask", L + "conformer", "conformer.conformer",
     lambda M: M.ConformerBlock(dim=32, dim_head=16, heads=2, ff_mult=2, conv_kernel_size=7,
                                conv_causal=True), R(2, 16, 32), B(2, 16), kw=("mask",))
case("mlp_mixer", L + "mlp-mixer-pytorch", "mlp_mixer_pytorch.mlp_mixer_pytorch",
     lambda M: M.MLPMixer(image_size=32, channels=3, patch_size=8, dim=32, depth=2,
                          num_classes=10), IMG)
case("permutator", L + "mlp-mixer-pytorch", "mlp_mixer_pytorch.permutator",
     lambda M: M.Permutator(image_size=32, patch_size=8, dim=32, depth=2, num_classes=10,
                            segments=4), IMG)
case("mlp_mixer_3d", L + "mlp-mixer-pytorch", "mlp_mixer_pytorch.mlp_mixer_3d_pytorch",
     lambda M: M.MLPMixer3D(image_size=32, time_size=4, channels=3, patch_size=8,
                            time_patch_size=2, dim=32, depth=1, num_classes=10),
     R(1, 3, 4, 32, 32))
case("gmlp_lm", L + "g-mlp-pytorch", "g_mlp_pytorch.g_mlp_pytorch",
     lambda M: M.gMLP(num_tokens=100, dim=32, depth=2, seq_len=16, circulant_matrix=True,
                      act=nn.Tanh()), I(100, 2, 16))
case("gmlp_causal_attn", L + "g-mlp-pytorch", "g_mlp_pytorch.g_mlp_pytorch",
     lambda M: M.gMLP(num_tokens=100, dim=32, depth=2, seq_len=16, causal=True, attn_dim=16,
                      heads=2, shift_tokens=1), I(100, 2, 16))
case("gmlp_vision", L + "g-mlp-pytorch", "g_mlp_pytorch.g_mlp_pytorch",
     lambda M: M.gMLPVision(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2),
     IMG)
case("nystrom_attention", L + "nystrom-attention", "nystrom_attention.nystrom_attention",
     lambda M: M.NystromAttention(dim=32, dim_head=16, heads=2, num_landmarks=8,
                                  residual_conv_kernel=5), R(2, 30, 32), B(2, 30),
     kw=("mask",))
case("nystromformer", L + "nystrom-attention", "nystrom_attention.nystrom_attention",
     lambda M: M.Nystromformer(dim=32, depth=2, dim_head=16, heads=2, num_landmarks=8,
                               attn_values_residual_conv_kernel=5), R(2, 32, 32))
case("lambda_layer_local", L + "lambda-networks", "lambda_networks.lambda_networks",
     lambda M: M.LambdaLayer(dim=16, dim_out=32, r=3, dim_k=16, heads=4, dim_u=4),
     R(2, 16, 8, 8))
case("axial_attention", L + "axial-attention", "axial_attention.axial_attention",
     lambda M: M.AxialAttention(dim=16, dim_index=1, dim_heads=8, heads=2, num_dimensions=2),
     R(2, 16, 8, 8))
case("axial_image_transformer", L + "axial-attention", "axial_attention.axial_attention",
     lambda M: M.AxialImageTransformer(dim=16, depth=2, heads=2, reversible=True,
                                       axial_pos_emb_shape=(8, 8)), R(2, 16, 8, 8))
case("reformer_lm", L + "reformer-pytorch", "reformer_pytorch.reformer_pytorch",
     lambda M: M.ReformerLM(num_tokens=100, dim=32, depth=2, max_seq_len=32, heads=2,
                            dim_head=16, bucket_size=8, n_hashes=2, causal=True),
     I(100, 2, 32))
case("reformer_lsh_attention", L + "reformer-pytorch", "reformer_pytorch.reformer_pytorch",
     lambda M: M.LSHSelfAttention(dim=32, heads=2, bucket_size=8, n_hashes=2, causal=False),
     R(2, 32, 32))
case("performer_lm", L + "performer-pytorch", "performer_pytorch.performer_pytorch",
     lambda M: M.PerformerLM(num_tokens=100, max_seq_len=32, dim=32, depth=2, heads=2,
                             dim_head=16, nb_features=16, causal=False), I(100, 2, 32))
case("performer_causal_local", L + "performer-pytorch", "performer_pytorch.performer_pytorch",
     lambda M: M.PerformerLM(num_tokens=100, max_seq_len=32, dim=32, depth=1, heads=2,
                             dim_head=16, nb_features=16, causal=True, local_attn_heads=1,
                             local_window_size=8, ff_glu=True), I(100, 2, 32))
case("performer_attention", L + "performer-pytorch", "performer_pytorch.performer_pytorch",
     lambda M: M.SelfAttention(dim=32, heads=2, dim_head=16, nb_features=16,
                               generalized_attention=True), R(2, 32, 32))
case("res_mlp", L + "res-mlp-pytorch", "res_mlp_pytorch.res_mlp_pytorch",
     lambda M: M.ResMLP(image_size=32, patch_size=8, dim=32, depth=2, num_classes=10), IMG)
case("siren_net", L + "siren-pytorch", "siren_pytorch.siren_pytorch",
     lambda M: M.SirenNet(dim_in=2, dim_hidden=32, dim_out=3, num_layers=3,
                          final_activation=nn.Sigmoid()), R(64, 2))
case("siren_wrapper_latent", L + "siren-pytorch", "siren_pytorch.siren_pytorch",
     lambda M: M.SirenWrapper(M.SirenNet(dim_in=2, dim_hidden=32, dim_out=3, num_layers=3),
                              image_width=8, image_height=8, latent_dim=32),
     R(1, 3, 8, 8), R(32), kw=("img", "latent"))
case("bottleneck_stack", L + "bottleneck-transformer-pytorch",
     "bottleneck_transformer_pytorch.bottleneck_transformer_pytorch",
     lambda M: M.BottleStack(dim=16, fmap_size=8, dim_out=32, proj_factor=2, num_layers=2,
                             heads=2, dim_head=8, downsample=True, rel_pos_emb=True),
     R(2, 16, 8, 8))
ME = L + "memory-efficient-attention-pytorch"
case("mem_efficient_attention", ME, "memory_efficient_attention_pytorch.memory_efficient_attention",
     lambda M: M.Attention(dim=32, heads=2, dim_head=16, causal=True, memory_efficient=True,
                           q_bucket_size=8, k_bucket_size=8), R(2, 32, 32))
case("mem_efficient_attention_plain", ME,
     "memory_efficient_attention_pytorch.memory_efficient_attention",
     lambda M: M.Attention(dim=32, heads=2, dim_head=16, causal=False), R(2, 32, 32),
     B(2, 32), kw=("mask",))
case("mem_efficient_transformer", ME, "memory_efficient_attention_pytorch.transformer",
     lambda M: M.Transformer(num_tokens=100, max_seq_len=32, dim=32, depth=2, heads=2,
                             dim_head=16, causal=True, q_bucket_size=8, k_bucket_size=8),
     I(100, 2, 32))
case("h_transformer_1d", L + "h-transformer-1d", "h_transformer_1d.h_transformer_1d",
     lambda M: M.HTransformer1D(num_tokens=100, dim=32, depth=2, max_seq_len=32, heads=2,
                                dim_head=16, block_size=8), I(100, 2, 32))
case("h_transformer_1d_causal", L + "h-transformer-1d", "h_transformer_1d.h_transformer_1d",
     lambda M: M.HTransformer1D(num_tokens=100, dim=32, depth=1, max_seq_len=32, heads=2,
                                dim_head=16, block_size=8, causal=True, shift_tokens=True),
     I(100, 2, 32))
LA = L + "linear-attention-transformer"
case("linear_attention_lm", LA, "linear_attention_transformer.linear_attention_transformer",
     lambda M: M.LinearAttentionTransformerLM(num_tokens=100, dim=32, depth=2, max_seq_len=32,
                                              heads=2, dim_head=16, causal=True,
                                              n_local_attn_heads=1, local_attn_window_size=8),
     I(100, 2, 32))
case("image_linear_attention", LA, "linear_attention_transformer.images",
     lambda M: M.ImageLinearAttention(chan=16, heads=2, key_dim=16, value_dim=16),
     R(2, 16, 8, 8))
