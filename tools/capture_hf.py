"""transformers architectures from tiny configs, for tools/capture_corpus.py (issue 12).

`hf_programs(all_causal_lm, max_models)` -> name -> build(). By hand: Llama, Mistral, T5,
BART, Whisper, CLIP, BERT, GPT-2, ViT (random init, eval; inputs made from the config).
With `all_causal_lm`: every model type of transformers' causal-LM auto mapping whose config
a generic shrink (`tiny`) makes small, called on input_ids, and every base model whose main
input is token ids or an image.
"""
from capture_idioms import Program

import torch


class Head(torch.nn.Module):
    """Calls a model with its inputs by keyword and returns one output field: a module (not
    a lambda), so that a stopped call still captures the model's children (partial capture)."""

    def __init__(self, model, names, field):
        super().__init__()
        self.model, self.names, self.field = model, names, field

    def forward(self, *inputs):
        return getattr(self.model(**dict(zip(self.names, inputs))), self.field)

SMALL = {  # config attribute -> tiny value, where the config has it
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "dim": 32, "embed_dim": 32,
    "intermediate_size": 64, "d_ff": 64, "ffn_dim": 64, "n_inner": 64, "hidden_dim": 64,
    "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "n_layers": 2,
    "encoder_layers": 1, "decoder_layers": 1, "num_decoder_layers": 1,
    "num_attention_heads": 2, "n_head": 2, "num_heads": 2, "n_heads": 2,
    "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 16, "d_kv": 16, "vocab_size": 99,
    "max_position_embeddings": 64, "n_positions": 64,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "kv_lora_rank": 16, "q_lora_rank": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
}
TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
             "sep_token_id", "cls_token_id")


def tiny(cfg):
    """Shrink a config in place (and its text sub-config)."""
    old_layers = getattr(cfg, "num_hidden_layers", None)
    for k, v in SMALL.items():
        if isinstance(getattr(cfg, k, None), int) and not isinstance(getattr(cfg, k), bool):
            setattr(cfg, k, v)
    for k in TOKEN_IDS:
        if isinstance(getattr(cfg, k, None), int) and getattr(cfg, k) >= 99:
            setattr(cfg, k, 1)
    layers = getattr(cfg, "num_hidden_layers", None)
    for k, v in list(vars(cfg).items()):  # per-layer lists (layer_types, ...)
        if isinstance(v, list) and old_layers and len(v) == old_layers and layers:
            setattr(cfg, k, v[:layers])
    for sub in ("text_config", "decoder", "encoder", "model_config"):
        if hasattr(cfg, sub) and hasattr(getattr(cfg, sub), "to_dict"):
            tiny(getattr(cfg, sub))
    return cfg


def vocab_of(cfg):
    """The smallest vocabulary of a config and its sub-configs (a wrapper config such as
    FastSpeech2ConformerWithHifiGan's keeps its text model's vocab_size in model_config),
    at most 99: token ids below it are valid for every embedding of the model."""
    sizes = [getattr(c, "vocab_size", None) for c in
             [cfg] + [v for v in vars(cfg).values() if hasattr(v, "to_dict")]]
    return min([s for s in sizes if isinstance(s, int) and s > 3] + [99])


def ids(n=8, batch=2, vocab=99):
    g = torch.Generator().manual_seed(1)
    return torch.randint(3, vocab, (batch, n), generator=g)


def named():
    import transformers as T

    def lm(cfg_cls, model_cls, **kw):
        def build():
            cfg = cfg_cls(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, vocab_size=99, **kw)
            m = model_cls(cfg).eval()
            return Program(Head(m, ["input_ids"], "logits"), [(ids(),)] * 3 + [(ids() % 50,)])
        return build

    def t5():
        cfg = T.T5Config(d_model=32, num_layers=2, num_heads=2, d_ff=64, d_kv=16,
                         vocab_size=99, decoder_start_token_id=0, pad_token_id=0)
        m = T.T5ForConditionalGeneration(cfg).eval()
        return Program(Head(m, ["input_ids", "decoder_input_ids"], "logits"),
                       [(ids(), ids(4))] * 3 + [(ids() % 50, ids(4) % 50)])

    def bart():
        cfg = T.BartConfig(d_model=32, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=2, decoder_attention_heads=2,
                           encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=99)
        m = T.BartForConditionalGeneration(cfg).eval()
        return Program(Head(m, ["input_ids", "decoder_input_ids"], "logits"),
                       [(ids(), ids(4))] * 3 + [(ids() % 50, ids(4) % 50)])

    def whisper():
        cfg = T.WhisperConfig(d_model=32, encoder_layers=1, decoder_layers=1,
                              encoder_attention_heads=2, decoder_attention_heads=2,
                              encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=99,
                              num_mel_bins=8, max_source_positions=16, pad_token_id=0,
                              bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                              max_target_positions=32)
        m = T.WhisperForConditionalGeneration(cfg).eval()
        feats = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(2))
        return Program(Head(m, ["input_features", "decoder_input_ids"], "logits"),
                       [(feats, ids(4))] * 3 + [(feats + 1, ids(4) % 50)])

    def clip():
        cfg = T.CLIPConfig(
            text_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=64, vocab_size=99),
            vision_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, image_size=32, patch_size=8))
        m = T.CLIPModel(cfg).eval()
        px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
        return Program(Head(m, ["input_ids", "pixel_values"], "logits_per_image"),
                       [(ids(), px)] * 3 + [(ids() % 50, px + 1)])

    def bert():
        cfg = T.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, vocab_size=99)
        m = T.BertModel(cfg).eval()
        return Program(Head(m, ["input_ids"], "last_hidden_state"),
                       [(ids(),)] * 3 + [(ids() % 50,)])

    def gpt2():
        cfg = T.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=99, n_positions=64)
        m = T.GPT2LMHeadModel(cfg).eval()
        return Program(Head(m, ["input_ids"], "logits"), [(ids(),)] * 3 + [(ids() % 50,)])

    def vit():
        cfg = T.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=64, image_size=32, patch_size=8)
        m = T.ViTModel(cfg).eval()
        px = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
        return Program(Head(m, ["pixel_values"], "last_hidden_state"),
                       [(px,)] * 3 + [(px + 1,)])

    return {"hf_llama": lm(T.LlamaConfig, T.LlamaForCausalLM, num_key_value_heads=1),
            "hf_mistral": lm(T.MistralConfig, T.MistralForCausalLM, num_key_value_heads=1),
            "hf_t5": t5, "hf_bart": bart, "hf_whisper": whisper, "hf_clip": clip,
            "hf_bert": bert, "hf_gpt2": gpt2, "hf_vit": vit}


def _mapped_types(mapping, max_models):
    """(model_type, class name) of a transformers auto mapping whose config transformers
    can build, at most `max_models` of them."""
    from transformers.models.auto import configuration_auto as ca

    found = [(t, c) for t, c in mapping.items() if isinstance(c, str) and t in ca.CONFIG_MAPPING_NAMES]
    return found[:max_models]


def causal_lms(max_models):
    """Every causal-LM model type transformers maps, built from its default config shrunk."""
    import transformers as T
    from transformers.models.auto import modeling_auto as ma

    out = {}
    for model_type, cls_name in _mapped_types(ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, max_models):
        def build(model_type=model_type, cls_name=cls_name):
            cfg = tiny(T.AutoConfig.for_model(model_type))
            m = getattr(T, cls_name)(cfg).eval()
            vocab = vocab_of(cfg)
            a = ids(vocab=vocab)
            new = a % min(50, vocab - 2) + 2
            return Program(Head(m, ["input_ids"], "logits"), [(a,)] * 3 + [(new,)])
        out[f"lm_{model_type}"] = build
    return out


def base_models(max_models):
    """Every base model type transformers maps whose main input is token ids or an image,
    built from its default config shrunk; encoder-decoders also get decoder_input_ids."""
    import inspect

    import transformers as T
    from transformers.models.auto import modeling_auto as ma

    out = {}
    for model_type, cls_name in _mapped_types(ma.MODEL_MAPPING_NAMES, max_models):
        def build(model_type=model_type, cls_name=cls_name):
            cfg = tiny(T.AutoConfig.for_model(model_type))
            for k in ("image_size", "patch_size", "num_channels"):
                sub = getattr(cfg, "vision_config", None)
                for c in (cfg, sub):
                    if c is not None and isinstance(getattr(c, k, None), int):
                        setattr(c, k, {"image_size": 32, "patch_size": 8,
                                       "num_channels": 3}[k])
            m = getattr(T, cls_name)(cfg).eval()
            params = inspect.signature(m.forward).parameters
            main = getattr(m, "main_input_name", "input_ids")
            if main == "input_ids":
                vocab = vocab_of(cfg)
                first = ids(vocab=vocab)
                new = first % min(50, vocab - 2) + 2
            elif main == "pixel_values":
                first = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
                new = first + 1
            else:
                raise ValueError(f"main input {main}")
            names, a, b = [main], [first], [new]
            if "decoder_input_ids" in params:
                names.append("decoder_input_ids")
                a.append(ids(4))
                b.append(ids(4) % 50 + 2)
            field = "last_hidden_state"
            return Program(Field(m, names, field), [tuple(a)] * 3 + [tuple(b)])
        out[f"base_{model_type}"] = build
    return out


class Field(Head):
    """Head for base models: the named output, else the first tensor of the output."""

    def forward(self, *inputs):
        out = self.model(**dict(zip(self.names, inputs)))
        value = getattr(out, self.field, None)
        return value if value is not None else out[0]


def hf_programs(all_causal_lm=False, max_models=400, max_base=0):
    progs = named()
    if all_causal_lm:
        for k, v in causal_lms(max_models).items():
            progs.setdefault(k, v)
    for k, v in base_models(max_base).items() if max_base else ():
        progs.setdefault(k, v)
    return progs
