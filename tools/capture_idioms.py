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


# The cases from here on (modules, torch APIs, everyday forward code) are in
# capture_idioms_torch.py; importing it registers them in PROGRAMS after the ones above, in
# file order. It imports Program, program, x and same from this module, all defined by now.
import capture_idioms_torch  # noqa: E402,F401
