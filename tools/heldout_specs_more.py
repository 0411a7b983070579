"""Cases of tools/heldout_specs.py's corpus from repositories other than vit-pytorch: GPTs,
segment-anything, CLIP, whisper, x-transformers, perceivers, MoE, MEGABYTE, dinov2, CIFAR
models, EfficientNet, pytorch/examples, and lucidrains' attention and MLP variants. Imported
by tools/capture_heldout.py; each `case(...)` adds to heldout_specs.CASES."""
from importlib import import_module as imp

from torch import nn

from heldout_specs import IMG, B, I, K, R, case  # noqa: F401

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

# -- diffusion UNets and autoencoders, a segmentation UNet, video, quantizers -----------------
GD = "openai/guided-diffusion"
UN = dict(image_size=16, in_channels=3, model_channels=32, out_channels=3, num_res_blocks=1,
          attention_resolutions=(2,), channel_mult=(1, 2), num_head_channels=8)


class _Diffusion(nn.Module):
    """A diffusion UNet called as its sampler calls it: model(x, timesteps, *context)."""

    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, x, t, *context):
        return self.unet(x, t, *context)


case("guided_unet", GD, "guided_diffusion.unet",
     lambda M: _Diffusion(M.UNetModel(**UN)), R(2, 3, 16, 16), I(1000, 2))
case("guided_unet_class_scale_shift", GD, "guided_diffusion.unet",
     lambda M: _Diffusion(M.UNetModel(num_classes=10, use_scale_shift_norm=True,
                                      resblock_updown=True, **UN)),
     R(2, 3, 16, 16), I(1000, 2), I(10, 2))
case("guided_encoder_unet", GD, "guided_diffusion.unet",
     lambda M: _Diffusion(M.EncoderUNetModel(pool="attention", **UN)), R(2, 3, 16, 16),
     I(1000, 2))
SD = "CompVis/stable-diffusion"
case("ldm_unet_cross_attn", SD, "ldm.modules.diffusionmodules.openaimodel",
     lambda M: _Diffusion(M.UNetModel(image_size=8, in_channels=4, model_channels=32,
                                      out_channels=4, num_res_blocks=1,
                                      attention_resolutions=(1,), channel_mult=(1, 2),
                                      num_head_channels=8, use_spatial_transformer=True,
                                      context_dim=24, transformer_depth=1)),
     R(2, 4, 8, 8), I(1000, 2), R(2, 5, 24))
case("ldm_encoder", SD, "ldm.modules.diffusionmodules.model",
     lambda M: M.Encoder(ch=32, out_ch=3, ch_mult=(1, 2), num_res_blocks=1,
                         attn_resolutions=(8,), in_channels=3, resolution=16, z_channels=4),
     R(2, 3, 16, 16))
case("ldm_decoder", SD, "ldm.modules.diffusionmodules.model",
     lambda M: M.Decoder(ch=32, out_ch=3, ch_mult=(1, 2), num_res_blocks=1,
                         attn_resolutions=(8,), in_channels=3, resolution=16, z_channels=4),
     R(2, 4, 8, 8))
case("ldm_spatial_transformer", SD, "ldm.modules.attention",
     lambda M: M.SpatialTransformer(32, n_heads=2, d_head=16, context_dim=24),
     R(2, 32, 4, 4), R(2, 5, 24), kw=("context",))
case("unet_segmentation", "milesial/Pytorch-UNet", "unet.unet_model",
     lambda M: M.UNet(n_channels=3, n_classes=2, bilinear=False), R(2, 3, 32, 32))
case("unet_segmentation_bilinear", "milesial/Pytorch-UNet", "unet.unet_model",
     lambda M: M.UNet(n_channels=3, n_classes=2, bilinear=True), R(2, 3, 32, 32))
case("timesformer", L + "TimeSformer-pytorch", "timesformer_pytorch.timesformer_pytorch",
     lambda M: M.TimeSformer(dim=32, num_frames=4, num_classes=10, image_size=32,
                             patch_size=8, depth=1, heads=2, dim_head=16),
     R(1, 4, 3, 32, 32))
VQ = L + "vector-quantize-pytorch"
case("vector_quantize", VQ, "vector_quantize_pytorch.vector_quantize_pytorch",
     lambda M: M.VectorQuantize(dim=32, codebook_size=64, decay=0.8,
                                commitment_weight=1.), R(2, 16, 32))
case("residual_vq", VQ, "vector_quantize_pytorch.residual_vq",
     lambda M: M.ResidualVQ(dim=32, num_quantizers=2, codebook_size=64), R(2, 16, 32))
case("fsq", VQ, "vector_quantize_pytorch.finite_scalar_quantization",
     lambda M: M.FSQ(levels=[8, 5, 5, 5]), R(2, 16, 4))
case("lfq", VQ, "vector_quantize_pytorch.lookup_free_quantization",
     lambda M: M.LFQ(codebook_size=64, dim=16, entropy_loss_weight=0.1), R(2, 16, 16))
