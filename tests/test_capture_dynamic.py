"""Symbolic shapes (paper §6.2.1): after 3 records (or with dynamic=True at once) new records
are compiled with symbolic sizes for argument-tensor dims the program did not read."""
import torch
from torch.testing import assert_close

from eagerc.capture import capture, capture_stats

W = torch.randn(8, 3)


def f_mm(x, w):
    return torch.relu(x @ w) * 2


def counts(cap):
    s = capture_stats(cap)
    return s["records"], s["graphs"]


def test_threshold_then_one_symbolic_record():
    cap = capture(f_mm)
    with torch.no_grad():
        for n in (2, 3, 4):  # three specialized records
            x = torch.randn(n, 8)
            assert_close(cap(x, W), f_mm(x, W))
        assert counts(cap) == (3, 3)
        for n in (5, 6, 7, 11, 64):  # the 4th record is symbolic in the batch dim
            x = torch.randn(n, 8)
            assert_close(cap(x, W), f_mm(x, W))
        assert counts(cap) == (4, 4)
        assert capture_stats(cap)["hits"] == 4


def test_symbolic_record_misses_what_it_cannot_serve():
    cap = capture(f_mm, dynamic=True)
    with torch.no_grad():
        x = torch.randn(4, 8)
        assert_close(cap(x, W), f_mm(x, W))
        for n in (9, 2):
            x = torch.randn(n, 8)
            assert_close(cap(x, W), f_mm(x, W))
        assert counts(cap) == (1, 1)
        for x in (torch.randn(1, 8), torch.randn(0, 8),  # 0/1 stay specialized
                  torch.randn(2, 3, 8),  # another rank
                  torch.randn(5, 8, dtype=torch.float64).float().t().contiguous().t(),
                  torch.randn(6, 8)[:, :8:1].T.T[::2]):  # other strides
            assert_close(cap(x, W), f_mm(x, W))
        assert capture_stats(cap)["hits"] == 2
        assert capture_stats(cap)["records"] >= 5


def f_branch(x):
    if x.shape[0] > 4:  # the program reads the size: that dim stays specialized
        return x * 2
    return x * 3


def f_reshape(x, y):
    n = y.size(0)  # y's sizes are read; x's are not
    return x.sum(-1) + y.reshape(n, -1).sum(-1)[:1]


def test_dims_read_by_the_program_stay_specialized():
    cap = capture(f_branch, backend="eager", dynamic=True)
    for n in (3, 6, 2, 8):
        x = torch.randn(n, 5)
        assert_close(cap(x), f_branch(x))
    assert capture_stats(cap)["records"] == 4
    cap = capture(f_reshape, backend="eager", dynamic=True)
    for nx in (3, 5, 7):
        x, y = torch.randn(nx, 4), torch.randn(2, 3)
        assert_close(cap(x, y), f_reshape(x, y))
    assert capture_stats(cap)["records"] == 1  # x is symbolic
    y = torch.randn(4, 3)
    assert_close(cap(x, y), f_reshape(x, y))  # y is not
    assert capture_stats(cap)["records"] == 2


class Biased(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(8))

    def forward(self, x):
        return x + self.bias


def test_graph_shape_guards_are_checked():
    m = Biased()
    cap = capture(m, dynamic=True)
    with torch.no_grad():
        for x in (torch.randn(3, 8), torch.randn(5, 8), torch.randn(4, 1)):
            assert_close(cap(x), m(x))  # (4, 1) broadcasts: the (n, 8) record must miss
        assert counts(cap) == (2, 2)


def test_bert_sequence_lengths():
    import transformers

    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=100)
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    cap = capture(model, dynamic=True)
    with torch.no_grad():
        for seq in (8, 12, 16):
            ids = torch.randint(0, 100, (2, seq))
            assert_close(cap(ids).last_hidden_state, model(ids).last_hidden_state)
        ids = torch.randint(0, 100, (2, 12))
        assert_close(cap(ids).last_hidden_state, model(ids).last_hidden_state)
    # BERT reads input_ids.size() in Python (slices position/token-type ids with it), so
    # both dims stay specialized: one record per sequence length, repeats hit.
    s = capture_stats(cap)
    assert (s["records"], s["hits"], s["stop_reasons"]) == (3, 1, {})
