"""The compile farm on Ray (eagerc/_cluster.py): warm_cache's calls as tasks of a local
Ray cluster, each worker compiling into a private Redis (the shared tier); a second
"host" (a fresh process with an empty local cache and the same Redis) then compiles
nothing; a task whose worker dies is retried; a task that raises is reported.

Skips where Ray or redis-server is missing."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
import torch

ray = pytest.importorskip("ray")
redis = pytest.importorskip("redis")

from eagerc import _cluster  # noqa: E402
from private_redis import RedisServer  # noqa: E402

pytestmark = pytest.mark.warm


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    try:
        yield server.start().url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_a_missing_cluster_says_how_to_start_one(monkeypatch):
    # First in this file: the other tests start a local cluster that "auto" would find.
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    try:
        _cluster.connect("auto")
    except _cluster.ClusterError as e:
        assert "cannot reach the Ray cluster at 'auto'" in str(e) and "ray start --head" in str(e)
    else:
        ray.shutdown()
        pytest.skip("a Ray cluster is running on this machine")


def _dies_once(task):
    """Kills its own worker process the first time it sees the marker's folder."""
    marker, value = task
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return value * 2


def _raises(task):
    raise ValueError(f"bad task {task}")


def _threads(task):
    return torch.get_num_threads()


def _sleeps(task):
    time.sleep(task)
    return task


@pytest.mark.slow  # a Ray worker killed and restarted (18 s); the farm's compiles stay in the default run
def test_a_task_whose_worker_dies_is_retried_and_one_that_raises_is_reported(local_ray, tmp_path):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests/
    results, failures = {}, {}
    _cluster.run(_dies_once, [(str(tmp_path / "died"), 21)], address="auto", env={},
                 on_result=results.__setitem__, on_failure=failures.__setitem__)
    assert failures == {} and list(results.values()) == [42]
    assert (tmp_path / "died").exists()  # the first attempt did die
    _cluster.run(_raises, [7], address="auto", env={}, on_result=results.__setitem__,
                 on_failure=failures.__setitem__)
    assert failures == {7: "ValueError: bad task 7"}
    # Past the timeout the task's worker is killed and the task fails; the others finish.
    # (30 s: on a loaded machine a new Ray worker for the short task can take several seconds)
    _cluster.run(_sleeps, [300, 0.1], address="auto", env={}, timeout=30,
                 on_result=results.__setitem__, on_failure=failures.__setitem__)
    assert failures[300] == "timeout: no answer in 30 s" and results[0.1] == 0.1


_SECOND_HOST = textwrap.dedent("""
    import sys, torch, eagerc
    sys.path.insert(0, {tests!r})
    from test_ray_farm import _model
    model, x = _model()
    with torch.no_grad():
        model(x)
    model(x)
    s = eagerc.stats()
    print("compiles", s["compiles"], "remote_loads", s.get("remote_loads", "?"))
""")


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4), torch.nn.Softmax(-1)).to("eagerc")
    return model, torch.randn(3, 8).to("eagerc")


def test_the_farms_environment_carries_the_drivers_thread_count(monkeypatch):
    # What the tasks below run under, without a cluster: the driver's thread count (Ray
    # starts its workers with OMP_NUM_THREADS=1), eagerc's settings, and compiles "now".
    from eagerc.warm import cluster_env

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("EAGERC_CACHE_DIR", "/nowhere/else")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    env = cluster_env()
    assert env["OMP_NUM_THREADS"] == "2" and env["EAGERC_COMPILE"] == "now"
    assert env["EAGERC_CACHE_DIR"] == "/nowhere/else"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # a count the driver was given is kept
    assert cluster_env()["OMP_NUM_THREADS"] == "3"


@pytest.mark.slow  # a local Ray cluster's start and two tasks: 30-60 s on a loaded 2-core machine
def test_farm_workers_compile_with_the_drivers_thread_count(local_ray, monkeypatch):
    # Inductor writes the thread count into parallel kernels; Ray's workers default to 1.
    from eagerc.warm import cluster_env

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)  # the driver's: not a worker's 1
    seen = {}
    _cluster.run(_threads, ["bare"], address="auto", env={},
                 on_result=seen.__setitem__, on_failure=seen.__setitem__)
    _cluster.run(_threads, ["warm"], address="auto", env=cluster_env(),
                 on_result=seen.__setitem__, on_failure=seen.__setitem__)
    assert seen == {"bare": 1, "warm": 2}


@pytest.mark.slow
def test_warm_on_ray_fills_the_shared_tier_for_every_host(local_ray, redis_url, fresh_cache,
                                                          monkeypatch, tmp_path):
    import eagerc
    from eagerc.warm import warm_cache

    monkeypatch.setenv("EAGERC_REMOTE_CACHE", redis_url)
    model, x = _model()
    report = warm_cache(model, x, cluster="auto")
    assert report.cluster == "auto" and report.failed == [], str(report)
    assert report.compiled > 0 and report.calls_compiled > 0 and report.complete, str(report)
    assert "Ray cluster" in str(report)
    assert redis.Redis.from_url(redis_url).dbsize() > 0  # the workers wrote the shared tier
    # Again on the farm: every call's kernels are found, none compiled.
    again = warm_cache(model, x, cluster="auto")
    assert again.compiled == 0 and again.cached == again.calls, str(again)
    # A second host: a fresh process, an empty local cache, the same Redis.
    env = dict(os.environ, EAGERC_CACHE_DIR=str(tmp_path / "host2-cache"),
               EAGERC_REMOTE_CACHE=redis_url)
    out = subprocess.run([sys.executable, "-c",
                          _SECOND_HOST.format(tests=os.path.dirname(__file__))],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[:2] == ["compiles", "0"], out.stdout


@pytest.mark.slow
def test_coverage_on_ray_answers_as_local_workers_do(local_ray, fresh_cache, tmp_path):
    import json

    from eagerc.coverage import coverage_command as command

    ops = "aten::abs,aten::add.Tensor,aten::cumsum,aten::nonzero"
    common = ["--device", "eagerc", "--ops", ops, "--quiet", "--samples", "2"]
    assert command.main(common + ["--out", str(tmp_path / "local"), "--workers", "1"]) == 0
    assert command.main(common + ["--out", str(tmp_path / "farm"), "--cluster", "auto",
                                  "--workers", "2"]) == 0

    def statuses(folder):
        with open(tmp_path / folder / "results.jsonl") as f:
            return {(r["op"], r["dtype"]): r["status"] for r in map(json.loads, f)}

    local, farm = statuses("local"), statuses("farm")
    assert len(local) >= 4 and farm == local
    assert "pass" in set(farm.values())  # compiled and equal to CPU eager


@pytest.mark.slow
def test_warm_command_line_on_a_local_cluster(fresh_cache, tmp_path):
    (tmp_path / "tiny_models.py").write_text(textwrap.dedent("""
        import torch
        def mlp():
            model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU()).to("eagerc")
            return model, (torch.randn(3, 4).to("eagerc"),)
    """))
    env = dict(os.environ, EAGERC_CACHE_DIR=str(fresh_cache))
    env.pop("RAY_ADDRESS", None)
    result = subprocess.run([sys.executable, "-m", "eagerc", "warm", "tiny_models:mlp",
                             "--cluster", "local", "--workers", "2"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "tasks on the Ray cluster 'local', up to 2 at once" in result.stdout
    assert re.search(r"calls replayed .* \+ 0 failed$", result.stdout, re.M), result.stdout
    assert int(re.search(r"kernels compiled\s+(\d+)", result.stdout).group(1)) > 0
