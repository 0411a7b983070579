"""diffusers models from small configs, for tools/capture_corpus.py and
tools/capture_train_corpus.py (issue 30): UNet2DConditionModel, AutoencoderKL (encode +
decode), UNet2DModel, a BasicTransformerBlock, a Transformer2DModel. Random init, eval;
inputs made from the config; the last call has new values, same shapes."""
import torch

from capture_hf import Head


class _Sample(torch.nn.Module):
    """model(*inputs) -> its `.sample` (diffusers' output dataclasses), a module so that a
    stopped call still splits into the model's children."""

    def __init__(self, model, call):
        super().__init__()
        self.model, self.call = model, call

    def forward(self, *inputs):
        return self.call(self.model, *inputs)


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _calls(*shapes):
    first = tuple(torch.randn(*s, generator=_g(i)) for i, s in enumerate(shapes))
    new = tuple(t + 0.5 for t in first)
    return [first] * 3 + [new]


def unet_cond():
    from diffusers import UNet2DConditionModel
    m = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4,
                             block_out_channels=(32, 64), layers_per_block=1,
                             down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                             up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
                             cross_attention_dim=32, attention_head_dim=8,
                             norm_num_groups=8).eval()
    t = torch.tensor([10])
    prog = _Sample(m, lambda mod, x, ctx: mod(x, t, encoder_hidden_states=ctx).sample)
    return prog, _calls((2, 4, 8, 8), (2, 6, 32))


def unet2d():
    from diffusers import UNet2DModel
    m = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, block_out_channels=(32, 64),
                    layers_per_block=1, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                    up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8).eval()
    t = torch.tensor([3])
    return _Sample(m, lambda mod, x: mod(x, t).sample), _calls((2, 3, 16, 16))


def vae():
    from diffusers import AutoencoderKL
    m = AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(32, 64),
                      down_block_types=("DownEncoderBlock2D",) * 2,
                      up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4,
                      layers_per_block=1, norm_num_groups=8, sample_size=16).eval()
    # mode() of the posterior: deterministic (sample() draws noise)
    return _Sample(m, lambda mod, x: mod.decode(mod.encode(x).latent_dist.mode()).sample), \
        _calls((2, 3, 16, 16))


def transformer_block():
    from diffusers.models.attention import BasicTransformerBlock
    m = BasicTransformerBlock(dim=32, num_attention_heads=2, attention_head_dim=16,
                              cross_attention_dim=24).eval()
    return _Sample(m, lambda mod, x, ctx: mod(x, encoder_hidden_states=ctx)), \
        _calls((2, 16, 32), (2, 5, 24))


def transformer2d():
    from diffusers import Transformer2DModel
    m = Transformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=32,
                           num_layers=1, cross_attention_dim=24, norm_num_groups=8).eval()
    return _Sample(m, lambda mod, x, ctx: mod(x, encoder_hidden_states=ctx).sample), \
        _calls((2, 32, 4, 4), (2, 5, 24))


def diffusers_programs():
    from capture_idioms import Program
    out = {}
    for make in (unet_cond, unet2d, vae, transformer_block, transformer2d):
        def build(make=make):
            fn, calls = make()
            return Program(fn, calls)
        out[f"diffusers_{make.__name__}"] = build
    return out


__all__ = ["diffusers_programs", "Head"]
