"""Real-world idioms for the capture corpus, second part: modules, torch APIs used in real
code and everyday forward code. Registered in capture_idioms.PROGRAMS (see that module for what
a `Program` holds); import capture_idioms, not this module, to get them all.
"""
import functools
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from capture_idioms import Program, program, same, x


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))

    def forward(self, x):
        return self.net(x)


@program
def sequential_cnn():
    return Program(Conv().eval(), same(x(2, 3, 8, 8)))


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


@program
def multihead_attention():
    return Program(Attn().eval(), same(x(2, 4, 8)))


@program
def transformer_encoder_layer():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    return Program(layer, same(x(2, 4, 8)))


@program
def lstm():
    m = nn.LSTM(4, 6, batch_first=True).eval()
    return Program(lambda x: m(x)[0], same(x(2, 3, 4)))


@program
def tensor_value_branch():
    def f(x):
        if x.sum() > 0:  # data-dependent: both tools break here
            return x * 2
        return x - 1
    return Program(f, same(x(4)))


@program
def item_to_python():
    def f(x):
        m = x.max().item()
        return x / (m + 1)
    return Program(f, same(x(4)))


@program
def print_in_forward():
    import io
    sink = io.StringIO()

    def f(x):
        print("shape", tuple(x.shape), file=sink)
        return x + 1
    return Program(f, same(x(2)))


@program
def print_statistic_in_forward():
    import io
    sink = io.StringIO()
    m = nn.Linear(4, 4).eval()

    def f(x):
        h = (m(x) * 2).relu()
        print("mean", round(h.mean().item(), 3), file=sink)  # logging a statistic: a stop
        return (h + x).tanh() * 0.5
    return Program(f, same(x(2, 4)), lambda: sink.getvalue())


@program
def list_comprehension_of_layers():
    layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)]).eval()

    def f(x):
        outs = [layer(x) for layer in layers]
        return torch.stack(outs).sum(0), len(outs)
    return Program(f, same(x(2, 4)))


@program
def inplace_update_of_input():
    def f(x, buf):
        buf.mul_(0.9).add_(x, alpha=0.1)
        return buf.clone()
    b = torch.zeros(4)
    return Program(f, [(x(4), b)] * 3, lambda: b.clone())


@program
def type_dispatch_helpers():
    def to_tuple(v):
        return tuple(v) if isinstance(v, (list, tuple)) else (v, v)

    def f(x, k):
        kh, kw = to_tuple(k)
        return F.avg_pool2d(x, (kh, kw))
    return Program(f, same(x(1, 2, 4, 4), 2))


@program
def einsum_and_chunk():
    def f(x):
        a, b, c = x.chunk(3, dim=-1)
        return torch.einsum("bi,bj->bij", a, b) + c.unsqueeze(-1)
    return Program(f, same(x(2, 9)))


@program
def enum_config():
    import enum

    class Mode(enum.Enum):
        SUM = "sum"
        MEAN = "mean"
    cfg = {"mode": Mode.MEAN}

    def f(x):
        return x.sum() if cfg["mode"] is Mode.SUM else x.mean()
    return Program(f, same(x(3, 3)))


# -- more everyday forward code -----------------------------------------------------------
class Named(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(3):
            setattr(self, f"layer{i}", nn.Linear(4, 4))

    def forward(self, x):
        for i in range(3):
            x = getattr(self, f"layer{i}")(x)
        return x


@program
def getattr_by_formatted_name():
    return Program(Named().eval(), same(x(2, 4)))


class WithProperty(nn.Module):
    HEADS = 2  # class-level configuration

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    @property
    def head_dim(self):
        return 8 // self.HEADS

    @staticmethod
    def split(t, n):
        return t.view(*t.shape[:-1], n, -1)

    def forward(self, x):
        q = self.split(self.proj(x), self.HEADS)
        return (q * self.head_dim ** -0.5).sum(-1)


@program
def property_staticmethod_classconst():
    return Program(WithProperty().eval(), same(x(2, 3, 8)))


@program
def asserts_and_isinstance():
    def f(x, y=None):
        assert x.dim() == 2, "expects a matrix"
        if not isinstance(x, torch.Tensor) or torch.jit.is_scripting():
            raise TypeError
        y = torch.zeros_like(x) if y is None else y
        return x + y
    return Program(f, same(x(3, 3)))


@program
def try_except_in_forward():
    def f(x, cfg):
        try:
            k = cfg["k"]
        except KeyError:
            k = 2
        return x * k
    return Program(f, same(x(3), {"j": 1}))


@program
def tensor_constants_and_arange():
    def f(x):
        pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        w = torch.tensor([0.5, 1.5, 2.0])
        return x * w + pos
    return Program(f, same(x(2, 3)))


class Emb(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(20, 8)
        self.pos = nn.Embedding(16, 8)
        self.register_buffer("position_ids", torch.arange(16).unsqueeze(0))

    def forward(self, ids):
        n = ids.shape[1]
        return self.tok(ids) + self.pos(self.position_ids[:, :n])


@program
def embeddings_with_buffer_slice():
    ids = torch.randint(0, 20, (2, 5), generator=torch.Generator().manual_seed(0))
    return Program(Emb().eval(), [(ids,)] * 3 + [((ids + 1) % 20,)])


@program
def interpolate_and_cat():
    def f(x):
        up = F.interpolate(x, scale_factor=2, mode="nearest")
        return torch.cat([up, up.flip(-1)], dim=1)
    return Program(f, same(x(1, 2, 4, 4)))


@program
def no_grad_and_inference_inside():
    def f(x):
        with torch.no_grad():
            y = x * 2
        with torch.enable_grad():
            z = y + 1
        return z
    return Program(f, same(x(3)))


@program
def reduce_and_zip_star():
    def f(xs):
        pairs = list(zip(*[(t, t * 2) for t in xs]))
        return functools.reduce(operator.add, pairs[0]) + sum(pairs[1])
    return Program(f, same([x(3), x(3, seed=1)]))


@program
def list_of_outputs_and_ints():
    def f(x):
        outs = []
        for i, chunk in enumerate(x.split(2, dim=0)):
            outs.append((i, chunk.mean()))
        return outs, {"n": len(outs)}
    return Program(f, same(x(6, 3)))


@program
def masked_fill_and_where():
    def f(x):
        mask = x > 0
        y = x.masked_fill(~mask, float("-inf")).softmax(-1)
        return torch.where(mask, y, torch.zeros_like(y)), mask.any(-1)
    return Program(f, same(x(3, 4)))


class Gru(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 4, batch_first=True)

    def forward(self, x, h=None):
        out, h = self.gru(x, h)
        return out[:, -1], h


@program
def gru_with_state():
    return Program(Gru().eval(), same(x(2, 3, 4)))


@program
def repeat_interleave_and_gather():
    def f(x, idx):
        r = x.repeat_interleave(2, dim=0)
        return r.gather(1, idx)
    idx = torch.tensor([[0, 1], [1, 0], [0, 0], [1, 1]])
    return Program(f, same(x(2, 2), idx))


@program
def dropout_in_eval_module():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.GELU()).eval()
    return Program(m, same(x(2, 4)))


@program
def optional_kwargs_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x, mask=None, return_dict=True, **kwargs):
            y = self.lin(x)
            if mask is not None:
                y = y * mask
            return {"y": y} if return_dict else (y,)
    m = M().eval()
    return Program(lambda x: m(x, mask=None, return_dict=True, output_attentions=False),
                   same(x(2, 4)))


@program
def inplace_activation_chain():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 4),
                      nn.Hardswish(inplace=True)).eval()
    return Program(m, same(x(2, 4)))
