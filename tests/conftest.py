"""Shared fixtures: every test session gets its own kernel cache directory, so tests
never read or write the user's kernel cache (~/.cache/eagerc, or $EAGERC_CACHE_DIR, which
is replaced here, not honoured) nor a shared remote tier ($EAGERC_REMOTE_CACHE is dropped;
the Redis tests start their own server); compiled kernels are shared across the tests of
one session (compiling is the slow part). Inductor's own caches stay shared: they hold
build products, not eagerc's kernels.

Slow tests (models, multi-process, > ~20 s; marked ``slow``) are deselected by
pyproject's ``addopts``; ``python -m pytest -m slow`` runs them, ``-m ""`` everything."""
from __future__ import annotations

import os
import tempfile

import pytest

_SESSION_CACHE = tempfile.mkdtemp(prefix="eagerc-test-cache-")
os.environ["EAGERC_CACHE_DIR"] = _SESSION_CACHE
os.environ.pop("EAGERC_REMOTE_CACHE", None)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty kernel cache directory and empty in-memory tables for one test."""
    import eagerc
    from eagerc import _C
    from eagerc.cache import service

    monkeypatch.setenv("EAGERC_CACHE_DIR", str(tmp_path / "cache"))
    service().reset()
    _C._clear_tables()
    eagerc.reset_stats()
    yield tmp_path / "cache"
    service().reset()
    _C._clear_tables()


@pytest.fixture
def miss_keys(fresh_cache):
    """(op name, signature key bytes) of every L1 miss the resolver sees, in order."""
    from eagerc import _C
    from eagerc.per_op import registration as ops

    keys = []

    def recording(request):
        keys.append((request.op_name, bytes(request.key)))
        return ops._resolve(request)

    _C._set_resolver(recording)
    yield keys
    _C._set_resolver(ops._resolve)


def pytest_configure(config):
    import os

    if os.environ.get("EAGERC_BACKING", "cpu").lower() == "cuda":
        # The eagerc device on GPU memory is compared with CPU eager: full fp32 on the GPU.
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


@pytest.fixture
def tiny_bert():
    """A factory of transformers' BertModel (2 layers, hidden 32), same weights each call."""
    transformers = pytest.importorskip("transformers")
    import torch

    def build():
        torch.manual_seed(0)
        cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, vocab_size=100,
                                      max_position_embeddings=64)
        return transformers.BertModel(cfg).eval()

    return build
