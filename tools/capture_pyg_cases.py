"""torch_geometric's models and conv layers as capture-corpus programs (tools/capture_pyg.py).

Each case builds a module on small random graphs (seeded): every conv layer of
torch_geometric.nn.conv as conv + relu + conv, and the models of torch_geometric.nn.models
(plus a few graph-classification stacks with pooling) with their documented inputs.
A case returns `Program(module, calls)`: three identical calls, one with new float values,
then a call on another graph (other node and edge counts), as a data loader gives them.
Cases needing an optional package that is not installed (torch_cluster, torch_sparse,
pyg_lib, torch_spline_conv, cugraph) raise ImportError when built or in eager, and the
runner skips them with that reason.
"""
import torch
import torch.nn as nn

from capture_idioms import Program

F_IN, E_DIM, N_REL = 8, 4, 3


def graph(seed, n=10, e=30):
    """x [n, 8], edge_index [2, e], edge_attr [e, 4], pos [n, 3], batch (two graphs),
    edge_type [e] (3 relations)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, F_IN, generator=g)
    ei = torch.randint(0, n, (2, e), generator=g)
    ea = torch.rand(e, E_DIM, generator=g)
    pos = torch.randn(n, 3, generator=g)
    batch = torch.cat([torch.zeros(n // 2, dtype=torch.long),
                       torch.ones(n - n // 2, dtype=torch.long)])
    et = torch.randint(0, N_REL, (e,), generator=g)
    return dict(x=x, ei=ei, ea=ea, pos=pos, batch=batch, et=et)


class ConvPair(nn.Module):
    """conv + relu + conv; `args` names what follows x in the conv's call."""

    def __init__(self, make, args, lin_in=None):
        super().__init__()
        self.args = args
        self.lin = nn.Linear(F_IN, lin_in) if lin_in else None
        self.conv1, c = make(lin_in or F_IN)
        self.conv2, _ = make(c)

    def forward(self, x, edge_index, edge_attr, pos, batch, edge_type):
        if self.lin is not None:
            x = self.lin(x)
        g = dict(ei=edge_index, ea=edge_attr, pos=pos, batch=batch, et=edge_type,
                 x0=x, nei=edge_index.flip(0), nt=torch.zeros_like(batch), normal=pos / pos.norm(dim=-1, keepdim=True))
        h = self.conv1(x, *[g[k] for k in self.args])
        h = (h[0] if isinstance(h, tuple) else h).relu()
        h = self.conv2(h, *[g[k] for k in self.args])
        return h[0] if isinstance(h, tuple) else h


def _mlp(i, o):
    return nn.Sequential(nn.Linear(i, 16), nn.ReLU(), nn.Linear(16, o))


def _deg():
    from torch_geometric.utils import degree
    return torch.bincount(degree(graph(0)["ei"][1], 10, dtype=torch.long), minlength=8)


def _convs():
    """name -> (make(in_channels) -> (conv, out_channels), call args after x, input width)."""
    import torch_geometric.nn as G
    o = 16
    one = lambda f: lambda i: (f(i), o)  # noqa: E731
    same = lambda f: lambda i: (f(i), i)  # noqa: E731
    return {
        "SimpleConv": (same(lambda i: G.SimpleConv()), ["ei"], None),
        "GCNConv": (one(lambda i: G.GCNConv(i, o)), ["ei"], None),
        "ChebConv": (one(lambda i: G.ChebConv(i, o, K=2)), ["ei"], None),
        "SAGEConv": (one(lambda i: G.SAGEConv(i, o)), ["ei"], None),
        "GraphConv": (one(lambda i: G.GraphConv(i, o)), ["ei"], None),
        "GravNetConv": (one(lambda i: G.GravNetConv(i, o, 2, 4, k=3)), [], None),
        "GatedGraphConv": (same(lambda i: G.GatedGraphConv(i, num_layers=2)), ["ei"], o),
        "ResGatedGraphConv": (one(lambda i: G.ResGatedGraphConv(i, o)), ["ei"], None),
        "GATConv": (lambda i: (G.GATConv(i, o, heads=2), 2 * o), ["ei"], None),
        "GATConv_edge_attr": (lambda i: (G.GATConv(i, o, heads=2, edge_dim=E_DIM), 2 * o),
                              ["ei", "ea"], None),
        "GATv2Conv": (lambda i: (G.GATv2Conv(i, o, heads=2), 2 * o), ["ei"], None),
        "TransformerConv": (lambda i: (G.TransformerConv(i, o, heads=2, edge_dim=E_DIM), 2 * o),
                            ["ei", "ea"], None),
        "AGNNConv": (same(lambda i: G.AGNNConv()), ["ei"], o),
        "TAGConv": (one(lambda i: G.TAGConv(i, o, K=2)), ["ei"], None),
        "GINConv": (one(lambda i: G.GINConv(_mlp(i, o), train_eps=True)), ["ei"], None),
        "GINEConv": (one(lambda i: G.GINEConv(_mlp(i, o), edge_dim=E_DIM)), ["ei", "ea"], None),
        "ARMAConv": (one(lambda i: G.ARMAConv(i, o, num_stacks=2, num_layers=2)), ["ei"], None),
        "SGConv": (one(lambda i: G.SGConv(i, o, K=2)), ["ei"], None),
        "SSGConv": (one(lambda i: G.SSGConv(i, o, alpha=0.1, K=2)), ["ei"], None),
        "APPNP": (same(lambda i: G.APPNP(K=2, alpha=0.1)), ["ei"], None),
        "MFConv": (one(lambda i: G.MFConv(i, o, max_degree=4)), ["ei"], None),
        "RGCNConv": (one(lambda i: G.RGCNConv(i, o, N_REL)), ["ei", "et"], None),
        "FastRGCNConv": (one(lambda i: G.FastRGCNConv(i, o, N_REL)), ["ei", "et"], None),
        "RGATConv": (one(lambda i: G.RGATConv(i, o, N_REL)), ["ei", "et"], None),
        "SignedConv": (lambda i: (G.SignedConv(i if i == F_IN else i // 2, o,
                                               first_aggr=i == F_IN), 2 * o),
                       ["ei", "nei"], None),
        "PointNetConv": (one(lambda i: G.PointNetConv(_mlp(i + 3, o), _mlp(o, o))),
                         ["pos", "ei"], None),
        "GMMConv": (one(lambda i: G.GMMConv(i, o, dim=E_DIM, kernel_size=2)), ["ei", "ea"], None),
        "SplineConv": (one(lambda i: G.SplineConv(i, o, dim=E_DIM, kernel_size=3)),
                       ["ei", "ea"], None),
        "NNConv": (one(lambda i: G.NNConv(i, o, nn.Linear(E_DIM, i * o))), ["ei", "ea"], None),
        "CGConv": (same(lambda i: G.CGConv(i, dim=E_DIM)), ["ei", "ea"], None),
        "EdgeConv": (one(lambda i: G.EdgeConv(_mlp(2 * i, o))), ["ei"], None),
        "DynamicEdgeConv": (one(lambda i: G.DynamicEdgeConv(_mlp(2 * i, o), k=3)), [], None),
        "XConv": (one(lambda i: G.XConv(i, o, dim=3, kernel_size=3)), ["pos"], None),
        "PPFConv": (one(lambda i: G.PPFConv(_mlp(i + 4, o), _mlp(o, o))),
                    ["pos", "normal", "ei"], None),
        "FeaStConv": (one(lambda i: G.FeaStConv(i, o, heads=2)), ["ei"], None),
        "PointTransformerConv": (one(lambda i: G.PointTransformerConv(i, o)), ["pos", "ei"], None),
        "HypergraphConv": (one(lambda i: G.HypergraphConv(i, o)), ["ei"], None),
        "LEConv": (one(lambda i: G.LEConv(i, o)), ["ei"], None),
        "PNAConv": (one(lambda i: G.PNAConv(i, o, ["mean", "min", "max", "std"],
                                            ["identity", "amplification", "attenuation"],
                                            _deg(), edge_dim=E_DIM)), ["ei", "ea"], None),
        "ClusterGCNConv": (one(lambda i: G.ClusterGCNConv(i, o)), ["ei"], None),
        "GENConv": (one(lambda i: G.GENConv(i, o, learn_t=True)), ["ei"], None),
        "GCN2Conv": (same(lambda i: G.GCN2Conv(i, alpha=0.1, theta=0.5, layer=1)),
                     ["x0", "ei"], o),
        "PANConv": (one(lambda i: G.PANConv(i, o, filter_size=2)), ["ei"], None),
        "WLConvContinuous": (same(lambda i: G.WLConvContinuous()), ["ei"], None),
        "FiLMConv": (one(lambda i: G.FiLMConv(i, o, num_relations=N_REL)), ["ei", "et"], None),
        "SuperGATConv": (lambda i: (G.SuperGATConv(i, o, heads=2), 2 * o), ["ei"], None),
        "FAConv": (same(lambda i: G.FAConv(i, eps=0.2)), ["x0", "ei"], o),
        "EGConv": (one(lambda i: G.EGConv(i, o, aggregators=["sum", "max"], num_heads=4)),
                   ["ei"], None),
        "PDNConv": (one(lambda i: G.PDNConv(i, o, edge_dim=E_DIM, hidden_channels=8)),
                    ["ei", "ea"], None),
        "GeneralConv": (one(lambda i: G.GeneralConv(i, o, in_edge_channels=E_DIM, heads=2,
                                                    attention=True)), ["ei", "ea"], None),
        "LGConv": (same(lambda i: G.LGConv()), ["ei"], None),
        "PointGNNConv": (same(lambda i: G.PointGNNConv(_mlp(i, 3), _mlp(i + 3, i),
                                                       _mlp(i, i))), ["pos", "ei"], o),
        "GPSConv": (same(lambda i: G.GPSConv(i, G.GINConv(_mlp(i, i)), heads=2)),
                    ["ei", "batch"], o),
        "AntiSymmetricConv": (same(lambda i: G.AntiSymmetricConv(i)), ["ei"], o),
        "DirGNNConv": (one(lambda i: G.DirGNNConv(G.GCNConv(i, o))), ["ei"], None),
        "MixHopConv": (lambda i: (G.MixHopConv(i, o), 3 * o), ["ei"], None),
        "HEATConv": (one(lambda i: G.HEATConv(i, o, 1, N_REL, 4, E_DIM, 4, heads=2,
                                              concat=False)), ["ei", "nt", "et", "ea"], None),
    }


class Model(nn.Module):
    """A model of torch_geometric.nn.models called with the graph's tensors named in `args`."""

    def __init__(self, model, call):
        super().__init__()
        self.model, self.call = model, call

    def forward(self, *args):
        return self.call(self.model, *args)


def _models():
    """name -> (build() -> module, graph keys passed, call(model, *tensors) or None,
    fixed graph size)."""
    import torch_geometric.nn as G
    from torch_geometric.nn import aggr, pool

    def deep_gcn():
        layers = nn.ModuleList()
        for _ in range(2):
            conv = G.GENConv(16, 16, aggr="softmax", t=1.0, learn_t=True, num_layers=2,
                             norm="layer")
            layers.append(G.DeepGCNLayer(conv, nn.LayerNorm(16), nn.ReLU(), block="res+"))
        return nn.ModuleDict({"lin": nn.Linear(F_IN, 16), "layers": layers})

    def deep_gcn_call(m, x, ei):
        h = m["lin"](x)
        for layer in m["layers"]:
            h = layer(h, ei)
        return h

    def meta_layer():
        class Edge(nn.Module):
            def __init__(self):
                super().__init__()
                self.mlp = _mlp(2 * F_IN + E_DIM + 4, E_DIM)

            def forward(self, src, dst, edge_attr, u, batch):
                return self.mlp(torch.cat([src, dst, edge_attr, u[batch]], 1))

        class Node(nn.Module):
            def __init__(self):
                super().__init__()
                self.mlp = _mlp(F_IN + E_DIM + 4, F_IN)

            def forward(self, x, edge_index, edge_attr, u, batch):
                agg = aggr.MeanAggregation()(edge_attr, edge_index[1], dim_size=x.size(0))
                return self.mlp(torch.cat([x, agg, u[batch]], 1))

        class Glob(nn.Module):
            def __init__(self):
                super().__init__()
                self.mlp = _mlp(4 + F_IN, 4)

            def forward(self, x, edge_index, edge_attr, u, batch):
                return self.mlp(torch.cat([u, pool.global_mean_pool(x, batch)], 1))
        return G.MetaLayer(Edge(), Node(), Glob())

    def gae(variational):
        class Enc(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = G.GCNConv(F_IN, 16)
                self.mu, self.logstd = G.GCNConv(16, 8), G.GCNConv(16, 8)

            def forward(self, x, ei):
                h = self.conv(x, ei).relu()
                return (self.mu(h, ei), self.logstd(h, ei)) if variational else self.mu(h, ei)
        return (G.VGAE if variational else G.GAE)(Enc())

    def gae_call(m, x, ei):
        z = m.encode(x, ei)
        return m.decode(z, ei), m.decoder.forward_all(z)

    def classifier(conv_pool):
        def build():
            return nn.ModuleDict({"conv": G.GCNConv(F_IN, 16), "pool": conv_pool(16),
                                  "lin": nn.Linear(16, 2)})

        def call(m, x, ei, batch):
            h = m["conv"](x, ei).relu()
            out = m["pool"](h, ei, batch=batch)
            h, batch = (out[0], out[3] if isinstance(out[3], torch.Tensor) else out[2]) \
                if isinstance(out, tuple) else (out, batch)  # EdgePooling: (x, ei, batch, info)
            return m["lin"](pool.global_max_pool(h, batch))
        return build, call

    def readout(agg):
        def build():
            return nn.ModuleDict({"gin": G.GIN(F_IN, 16, 2), "agg": agg()})
        return build, lambda m, x, ei, batch: m["agg"](m["gin"](x, ei), batch)

    xe = ["x", "ei"]
    xeb = ["x", "ei", "batch"]
    out = {
        "GCN": (lambda: G.GCN(F_IN, 16, 2, 4), xe, None, False),
        "GCN_jk_cat_batchnorm": (lambda: G.GCN(F_IN, 16, 3, 4, jk="cat", norm="batch_norm"),
                                 xe, None, False),
        "GraphSAGE": (lambda: G.GraphSAGE(F_IN, 16, 2, 4), xe, None, False),
        "GraphSAGE_jk_lstm": (lambda: G.GraphSAGE(F_IN, 16, 2, 4, jk="lstm"), xe, None, False),
        "GIN": (lambda: G.GIN(F_IN, 16, 2, 4), xe, None, False),
        "GAT": (lambda: G.GAT(F_IN, 16, 2, 4, heads=2), xe, None, False),
        "GATv2_edge_attr": (lambda: G.GAT(F_IN, 16, 2, 4, v2=True, edge_dim=E_DIM),
                            ["x", "ei", "ea"], None, False),
        "PNA": (lambda: G.PNA(F_IN, 16, 2, 4, aggregators=["mean", "max", "std"],
                              scalers=["identity", "amplification"], deg=_deg()), xe, None, False),
        "EdgeCNN": (lambda: G.EdgeCNN(F_IN, 16, 2, 4), xe, None, False),
        "MLP": (lambda: G.MLP([F_IN, 16, 4], norm="batch_norm"), ["x"], None, False),
        "SchNet": (lambda: G.SchNet(16, 16, 2, 10, cutoff=3.0), ["z", "pos", "batch"], None,
                   False),
        "DimeNet": (lambda: G.DimeNet(16, 1, 1, 2, 3, 3, cutoff=3.0), ["z", "pos", "batch"],
                    None, False),
        "DimeNetPlusPlus": (lambda: G.DimeNetPlusPlus(16, 1, 1, 8, 8, 8, 3, 3, cutoff=3.0),
                            ["z", "pos", "batch"], None, False),
        "AttentiveFP": (lambda: G.AttentiveFP(F_IN, 16, 4, E_DIM, 2, 2),
                        ["x", "ei", "ea", "batch"], None, False),
        "GraphUNet": (lambda: G.GraphUNet(F_IN, 16, 4, depth=2), xeb, None, False),
        "DeepGCN": (deep_gcn, xe, deep_gcn_call, False),
        "MetaLayer": (meta_layer, ["x", "ei", "ea", "u", "batch"], None, False),
        "GAE": (lambda: gae(False), xe, gae_call, False),
        "VGAE": (lambda: gae(True), xe, gae_call, False),
        "Node2Vec": (lambda: G.Node2Vec(graph(0)["ei"], 16, 4, 2, num_nodes=10), ["nodes"],
                     None, True),
        "RECT_L": (lambda: G.RECT_L(F_IN, 16), xe, None, False),
        "LINKX": (lambda: G.LINKX(10, F_IN, 16, 4, 2), xe, None, True),
        "LightGCN": (lambda: G.LightGCN(10, 16, 2), ["ei"], None, True),
        "PMLP": (lambda: G.PMLP(F_IN, 16, 4, 2), xe, None, False),
        "NeuralFingerprint": (lambda: G.NeuralFingerprint(F_IN, 16, 4, 2), xeb, None, False),
        "SGFormer": (lambda: G.SGFormer(F_IN, 16, 4, gnn_num_layers=2), xeb, None, False),
        "Polynormer": (lambda: G.Polynormer(F_IN, 16, 4, local_layers=2, global_layers=1),
                       xeb, None, False),
        "SignedGCN": (lambda: G.SignedGCN(F_IN, 16, 2), ["x", "ei", "nei"], None, False),
        "GroupAddRev": (lambda: G.GroupAddRev(G.GCNConv(4, 4), num_groups=2), xe, None, False),
        "DeepGraphInfomax": (lambda: G.DeepGraphInfomax(
            16, G.GCN(F_IN, 16, 1), lambda z, *a, **k: torch.sigmoid(z.mean(dim=0)),
            lambda x, ei: (x[torch.randperm(x.size(0))], ei)), xe, None, False),
        "ARLinkPredictor": (lambda: G.ARLinkPredictor(F_IN, 16), xe, None, False),
        "MaskLabel": (lambda: G.MaskLabel(3, F_IN), ["x", "y", "mask"], None, False),
        "LabelPropagation": (lambda: G.LabelPropagation(3, 0.9), ["y", "ei", "mask"], None,
                             False),
        "GNNFF": (lambda: G.GNNFF(16, 16, 2, cutoff=3.0), ["z", "pos", "batch"], None, False),
        "ViSNet": (lambda: G.ViSNet(num_heads=2, num_layers=2, hidden_channels=16, num_rbf=8,
                                    cutoff=3.0), ["z", "pos", "batch"], None, False),
        "TopKPooling_classifier": classifier(lambda c: pool.TopKPooling(c, ratio=0.5)) + (xeb,),
        "SAGPooling_classifier": classifier(lambda c: pool.SAGPooling(c, ratio=0.5)) + (xeb,),
        "ASAPooling_classifier": classifier(lambda c: pool.ASAPooling(c, ratio=0.5)) + (xeb,),
        "EdgePooling_classifier": classifier(lambda c: pool.EdgePooling(c)) + (xeb,),
        "GIN_Set2Set": readout(lambda: aggr.Set2Set(16, processing_steps=2)) + (xeb,),
        "GIN_AttentionalAggregation": readout(
            lambda: aggr.AttentionalAggregation(nn.Linear(16, 1))) + (xeb,),
        "GIN_SortAggregation": readout(lambda: aggr.SortAggregation(k=3)) + (xeb,),
        "GIN_MultiAggregation": readout(lambda: aggr.MultiAggregation(
            ["mean", "max", "std"], mode="proj", mode_kwargs=dict(in_channels=16,
                                                                   out_channels=16))) + (xeb,),
        "GIN_SoftmaxAggregation": readout(lambda: aggr.SoftmaxAggregation(learn=True)) + (xeb,),
        "GIN_PowerMeanAggregation": readout(
            lambda: aggr.PowerMeanAggregation(learn=True)) + (xeb,),
        "GIN_MedianAggregation": readout(lambda: aggr.MedianAggregation()) + (xeb,),
        "GIN_LSTMAggregation": readout(lambda: aggr.LSTMAggregation(16, 16)) + (xeb,),
        "GIN_GRUAggregation": readout(lambda: aggr.GRUAggregation(16, 16)) + (xeb,),
        "GIN_MLPAggregation": readout(lambda: aggr.MLPAggregation(
            16, 16, max_num_elements=6, num_layers=1)) + (xeb,),
        "GIN_DeepSetsAggregation": readout(lambda: aggr.DeepSetsAggregation(
            nn.Linear(16, 16), nn.Linear(16, 16))) + (xeb,),
        "GIN_SetTransformerAggregation": readout(
            lambda: aggr.SetTransformerAggregation(16, heads=2)) + (xeb,),
        "GIN_GraphMultisetTransformer": readout(
            lambda: aggr.GraphMultisetTransformer(16, k=4, heads=2)) + (xeb,),
        "GIN_EquilibriumAggregation": readout(
            lambda: aggr.EquilibriumAggregation(16, 16, [16], grad_iter=2)) + (xeb,),
        "GIN_VariancePreservingAggregation": readout(
            lambda: aggr.VariancePreservingAggregation()) + (xeb,),
    }
    from torch_geometric.nn import norm
    for name, make in {"GraphNorm": lambda: norm.GraphNorm(16),
                       "LayerNorm_graph": lambda: norm.LayerNorm(16, mode="graph"),
                       "InstanceNorm": lambda: norm.InstanceNorm(16, track_running_stats=True),
                       "PairNorm": lambda: norm.PairNorm(), "BatchNorm": lambda: norm.BatchNorm(16),
                       "DiffGroupNorm": lambda: norm.DiffGroupNorm(16, groups=2),
                       "MeanSubtractionNorm": lambda: norm.MeanSubtractionNorm(),
                       "GraphSizeNorm": lambda: norm.GraphSizeNorm()}.items():
        out[f"GCN_{name}"] = (_normed(make), xeb, _normed_call, False)
    for k, v in out.items():  # classifiers and readouts: (build, call, keys) -> canonical
        if len(v) == 3:
            out[k] = (v[0], v[2], v[1], False)
    return out


def _normed(make_norm):
    """GCNConv, a normalization layer of torch_geometric.nn.norm, relu, linear."""
    def build():
        import inspect
        import torch_geometric.nn as G
        m = nn.ModuleDict({"conv": G.GCNConv(F_IN, 16), "norm": make_norm(),
                           "lin": nn.Linear(16, 4)})
        m.norm_takes_batch = "batch" in inspect.signature(m["norm"].forward).parameters
        return m
    return build


def _normed_call(m, x, ei, batch):
    h = m["conv"](x, ei)
    h = m["norm"](h, batch) if m.norm_takes_batch else m["norm"](h)
    return m["lin"](h.relu())


def _extra(g, n):
    """Inputs some models take besides the graph: atom numbers, labels, a mask, u, nodes."""
    gen = torch.Generator().manual_seed(n)
    g["z"] = torch.randint(1, 10, (n,), generator=gen)
    g["pos"] = g["pos"] * 1.5
    g["y"] = torch.randint(0, 3, (n,), generator=gen)
    g["mask"] = torch.rand(n, generator=gen) < 0.5
    g["u"] = torch.randn(2, 4, generator=gen)
    g["nodes"] = torch.arange(n)
    g["nei"] = g["ei"].flip(0)
    g["nt"] = torch.zeros(n, dtype=torch.long)
    return g


def _calls(keys, fixed):
    gs = [_extra(graph(0), 10)] + ([] if fixed else [_extra(graph(1, n=12, e=40), 12)])
    first = tuple(gs[0][k] for k in keys)
    new = tuple(t + 1 if t.is_floating_point() else t for t in first)
    return [first] * 3 + [new] + [tuple(g[k] for k in keys) for g in gs[1:]]


def pyg_programs():
    """name -> build() -> Program, convs first ("conv_*"), then models ("model_*")."""
    out = {}
    for name, (make, args, lin_in) in _convs().items():
        def build(make=make, args=args, lin_in=lin_in):
            return Program(ConvPair(make, args, lin_in).eval(),
                           _calls(["x", "ei", "ea", "pos", "batch", "et"], False))
        out[f"conv_{name}"] = build
    for name, (make, keys, call, fixed) in _models().items():
        def build(make=make, keys=keys, call=call, fixed=fixed):
            m = make()
            m = Model(m, call) if call else m
            return Program(m.eval(), _calls(keys, fixed))
        out[f"model_{name}"] = build
    return out
