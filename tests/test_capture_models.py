"""Models nobody here wrote (transformers, small configs, random init) under eagerc.capture:
one record and one Inductor graph per model, outputs equal eager, new inputs hit."""
import pytest
import torch
from torch.testing import assert_close

from eagerc.capture import capture, capture_stats

transformers = pytest.importorskip("transformers")


def bert():
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=64)
    return transformers.BertModel(cfg), lambda: (torch.randint(0, 100, (2, 16)),)


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2,
                                  n_positions=64, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2Model(cfg), lambda: (torch.randint(0, 100, (2, 16)),)


def resnet():
    cfg = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                    layer_type="basic")
    return transformers.ResNetModel(cfg), lambda: (torch.randn(2, 3, 32, 32),)


def vit():
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, image_size=32, patch_size=8)
    return transformers.ViTModel(cfg), lambda: (torch.randn(2, 3, 32, 32),)


def assert_outputs_close(got, ref):
    assert type(got) is type(ref)
    assert list(got.keys()) == list(ref.keys())
    for k in ref.keys():
        if isinstance(ref[k], torch.Tensor):
            assert_close(got[k], ref[k], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("make", [bert, gpt2, resnet, vit], ids=lambda f: f.__name__)
def test_model_one_graph_equal_to_eager(make):
    torch.manual_seed(0)
    model, inputs = make()
    model.eval()
    cap = capture(model)
    with torch.no_grad():
        first = inputs()
        assert_outputs_close(cap(*first), model(*first))
        for _ in range(2):  # new values, same shapes: the guard passes, the mock runs
            again = inputs()
            assert_outputs_close(cap(*again), model(*again))
    st = capture_stats(cap)
    assert st["stop_reasons"] == {}
    assert (st["records"], st["graphs"], st["hits"], st["misses"]) == (1, 1, 2, 1)
