"""A GPU wrapper whose while_loop subgraphs each declare the stream compiles once the repeat
is dropped (eagerc/codegen/triton/stream_declarations.py); a stream declared in a sibling block,
which the outer scope cannot see, is kept."""
import shutil
import subprocess

import pytest

from eagerc.codegen.triton.stream_declarations import drop_repeated_stream_declarations

# The shape of torch 2.11's JIT C++ wrapper for a while_loop on CUDA (trimmed).
_PRELUDE = """typedef struct CUstream_st* cudaStream_t;
int get_stream(int, void**);
void launch(const char*, cudaStream_t);
"""
_WHILE_LOOP_WRAPPER = """void entry(int steps) {
    cudaStream_t stream0;
    get_stream(0, (void**)&stream0);
    launch("init", stream0);
    while (1) {
        // subgraph: while_loop_cond_graph_0
        cudaStream_t stream0;
        get_stream(0, (void**)&stream0);
        launch("cond", stream0);
        if (!steps--) break;
        // subgraph: while_loop_body_graph_0
        { const char* note = "{ not a block"; (void)note; }
        cudaStream_t stream0;
        get_stream(0, (void**)&stream0);
        launch("body", stream0);
    }
    if (steps) {
        cudaStream_t stream1;
        get_stream(1, (void**)&stream1);
        launch("one", stream1);
    }
    cudaStream_t stream1;
    get_stream(1, (void**)&stream1);
    launch("after", stream1);
}
"""


def _compiles(code, tmp_path):
    source = tmp_path / "wrapper.cpp"
    source.write_text(_PRELUDE + code)
    done = subprocess.run(["g++", "-fsyntax-only", "-std=c++17", str(source)],
                          capture_output=True, text=True, timeout=60)
    return done.returncode == 0, done.stderr


def test_repeated_declaration_in_one_block_is_dropped():
    fixed = drop_repeated_stream_declarations(_WHILE_LOOP_WRAPPER)
    assert fixed.count("cudaStream_t stream0;") == 1  # the function's own
    # The loop still fetches the current stream before each launch.
    assert fixed.count("get_stream(0, (void**)&stream0);") == 3
    # stream1 of the if-block is out of scope after it: both declarations stay.
    assert fixed.count("cudaStream_t stream1;") == 2


def test_wrapper_without_repeats_is_unchanged():
    single = "void f() {\n    cudaStream_t stream0;\n    get_stream(0, (void**)&stream0);\n}\n"
    assert drop_repeated_stream_declarations(single) == single


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_fixed_wrapper_compiles_where_inductors_did_not(tmp_path):
    ok, errors = _compiles(_WHILE_LOOP_WRAPPER, tmp_path)
    assert not ok and "redeclaration" in errors
    ok, errors = _compiles(drop_repeated_stream_declarations(_WHILE_LOOP_WRAPPER), tmp_path)
    assert ok, errors
