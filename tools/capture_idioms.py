"""Real-world idioms for the capture corpus (tools/capture_corpus.py, issue 12).

Each entry of `PROGRAMS` is `name -> build()`; `build()` returns a `Program`: the callable
(function or nn.Module), the argument tuples of its calls (the first ones identical, so a
re-record on an identical call shows), and optionally `state()`, the outside state its
side effects touch (compared with eager's after the calls). Every build makes fresh state,
so eager, capture and Dynamo each run their own copy.
"""
import collections
import copy
import dataclasses
import functools
import math
import operator
import warnings
import weakref
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Program(NamedTuple):
    fn: Callable
    calls: list  # argument tuples, one per call
    state: Optional[Callable] = None  # () -> outside state to compare after the calls


PROGRAMS = {}


def program(fn):
    PROGRAMS[fn.__name__] = fn
    return fn


def x(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def same(*args, n=3):
    """n identical calls, then one with new values of the same shapes."""
    new = tuple(a + 1 if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args)
    return [args] * n + [new]


# -- globals, closures, constants -----------------------------------------------------------
SCALE = 0.5
NP_SCALE = np.float64(0.25)
EPS = 1e-6
ACTS = {"relu": F.relu, "gelu": F.gelu}


@program
def global_scalars():
    def f(x):
        return F.relu(x) * SCALE + NP_SCALE + EPS
    return Program(f, same(x(2, 8)))


@program
def closure_factory():
    def make(act, k):
        def f(x):
            return ACTS[act](x) * k
        return f
    return Program(make("gelu", 3.0), same(x(4, 4)))


@program
def functools_partial():
    f = functools.partial(F.layer_norm, normalized_shape=(8,), eps=1e-5)
    return Program(lambda x: f(x) + 1, same(x(3, 8)))


# -- module state and side effects ----------------------------------------------------------
class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


@program
def module_counter():
    m = Counter().eval()
    return Program(m, same(x(2, 8)), lambda: m.calls)


LOG = []


@program
def global_list_append():
    del LOG[:]

    def f(x, ys):
        LOG.append(len(ys))
        return x + len(ys)
    return Program(f, same(x(3), [1, 2]), lambda: list(LOG))


STATS = {"n": 0}


@program
def global_dict_counter():
    STATS["n"] = 0

    def f(x):
        STATS["n"] += 1
        STATS["last_shape"] = tuple(x.shape)
        return x.sum(0)
    return Program(f, same(x(3, 4)), lambda: dict(STATS))


class Cache(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        self.cache["last"] = x * 2
        return self.cache["last"] + 1


@program
def module_dict_cache():
    m = Cache()
    return Program(m, same(x(2, 3)), lambda: {k: v.clone() for k, v in m.cache.items()})


class History(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def forward(self, x):
        y = x.tanh()
        self.history.append(y.shape[0])
        return y


@program
def module_list_append():
    m = History()
    return Program(m, same(x(2, 3)), lambda: list(m.history))


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.step = 0

    def forward(self, x):
        self.step = operator.index(self.step) + 1
        return x * 2


@program
def operator_index_counter():
    m = Step()
    return Program(m, same(x(3)), lambda: m.step)


# -- calling conventions ----------------------------------------------------------------------
@program
def kwargs_and_defaults():
    def f(x, *, scale=1.0, bias=None, **extra):
        out = x * scale
        if bias is not None:
            out = out + bias
        if extra.get("square"):
            out = out * out
        return out
    b = x(4)
    return Program(lambda x, b: f(x, scale=2.0, bias=b, square=True), same(x(3, 4), b))


@program
def star_args_permute():
    def f(x):
        dims = (d for d in (0, 2, 1))
        y = x.permute(*dims)
        a, b = (t for t in y.unbind(0))
        return a @ b.transpose(0, 1)
    return Program(f, same(x(2, 3, 4)))


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleDict({"a": nn.Linear(6, 6), "b": nn.Linear(6, 6)})
        self.norms = nn.ModuleList([nn.LayerNorm(6) for _ in range(2)])

    def forward(self, x):
        for (name, blk), norm in zip(self.blocks.items(), self.norms):
            x = norm(x + blk(x))
        return x


@program
def moduledict_loop():
    return Program(Blocks().eval(), same(x(2, 6)))


@dataclasses.dataclass
class Out:
    logits: torch.Tensor
    hidden: Any = None
    extra: dict = dataclasses.field(default_factory=dict)


class DataOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        h = x.relu()
        return Out(self.lin(h), hidden=h, extra={"n": h.shape[0]})


@program
def dataclass_output():
    return Program(DataOut().eval(), same(x(2, 4)))


class Pair(NamedTuple):
    a: torch.Tensor
    b: torch.Tensor


@program
def namedtuple_output():
    return Program(lambda x: Pair(x.sin(), x.cos()), same(x(5)))


@program
def ordered_dict_output():
    def f(x):
        out = collections.OrderedDict()
        out["mean"] = x.mean(-1)
        out["max"] = x.amax(-1)
        return out
    return Program(f, same(x(3, 5)))


# -- torch APIs used in real code -------------------------------------------------------------
class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@program
def autograd_function():
    return Program(lambda x: Square.apply(x) + 1, same(x(4)))


class Builds(nn.Module):
    def forward(self, x):
        lin = nn.Linear(x.shape[-1], 2)  # constructed inside forward (real code does)
        return lin(x)


@program
def module_built_in_forward():
    return Program(Builds(), same(x(3, 4)))


@program
def tensor_data_and_variable():
    def f(x):
        y = torch.autograd.Variable(x * 2)
        return y.data + x.data.sum()
    return Program(f, same(x(3)))


@program
def numpy_on_python_numbers():
    def f(x):
        d = x.shape[-1]
        scale = 1.0 / np.sqrt(d)
        n = int(np.prod(x.shape[1:]))
        w = np.array([1.0, 2.0, 3.0]).sum()
        return x.reshape(x.shape[0], n) * scale * float(w)
    return Program(f, same(x(2, 3, 4)))


@program
def math_on_sizes():
    def f(x):
        d = x.size(-1)
        return x * (1 / math.sqrt(d)) + math.log(d) + math.pi
    return Program(f, same(x(2, 16)))


@program
def warnings_in_forward():
    def f(x):
        if x.dim() > 1:
            warnings.warn("flattening input", UserWarning)
            x = x.flatten()
        return x.cumsum(0)
    return Program(f, same(x(2, 3)))


@program
def import_in_forward():
    def f(x):
        import torch.nn.functional as F2
        from math import sqrt
        return F2.softplus(x) * sqrt(2.0)
    return Program(f, same(x(4)))


class Parent(nn.Module):
    def __init__(self):
        super().__init__()
        self.child = nn.Linear(3, 3)
        self._ref = weakref.ref(self.child)

    def forward(self, x):
        return self._ref()(x) * 2


@program
def weakref_call():
    return Program(Parent().eval(), same(x(2, 3)))


@program
def str_results():
    def f(x):
        name = x.type()
        tag = f"{x.dtype}".split(".")[-1]
        if name.endswith("FloatTensor") and tag == "float32":
            return x * 2
        return x
    return Program(f, same(x(3)))


@program
def deepcopy_config():
    class Cfg:
        def __init__(self):
            self.scale = 2.0
            self.sub = {"k": [1, 2]}
    cfg = Cfg()

    def f(x):
        c = copy.deepcopy(cfg)
        return x * c.scale * len(c.sub["k"])
    return Program(f, same(x(3)))


@program
def pow_and_reflected_ops():
    return Program(lambda x: (x ** 2 + 2 ** x - 1 / (x.abs() + 1)) // 1, same(x(4)))


@program
def shape_arithmetic_view():
    def f(x):
        b, t, c = x.shape
        h = 2
        q = x.view(b, t, h, c // h).transpose(1, 2)
        att = (q @ q.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
        att = att.masked_fill(torch.ones(t, t).tril() == 0, float("-inf")).softmax(-1)
        return (att @ q).transpose(1, 2).reshape(b, t, c)
    return Program(f, same(x(2, 5, 8)))


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
