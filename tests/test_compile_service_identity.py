"""Which processes share a compile service (eagerc/compile_service/client.py): those with
the same interpreter, eagerc, key format, cache and settings; a service of another key
format is another service (its kernels would be filed under keys the caller no longer
looks up)."""
from eagerc import kernel_key
from eagerc.compile_service import client


def test_a_service_of_another_key_format_is_another_service(monkeypatch):
    env = {"EAGERC_CACHE_DIR": "/tmp/somewhere", "HOME": "/root"}
    client._folders.clear()
    now = client.folder_for(env)
    assert client.identity(env)["key_format"] == kernel_key.FORMAT_VERSION
    monkeypatch.setattr(kernel_key, "FORMAT_VERSION", kernel_key.FORMAT_VERSION + 1)
    client._folders.clear()
    assert client.folder_for(env) != now
    client._folders.clear()


def test_the_service_knobs_and_unrelated_variables_do_not_split_services():
    base = {"EAGERC_CACHE_DIR": "/tmp/somewhere"}
    same = dict(base, EAGERC_COMPILE="now", EAGERC_COMPILE_WORKERS="3", TERM="xterm")
    other = dict(base, TORCHINDUCTOR_MAX_AUTOTUNE="1")
    assert client.identity(base) == client.identity(same)
    assert client.identity(base) != client.identity(other)


def test_inductor_setting_its_cache_folder_late_does_not_start_a_second_service(monkeypatch):
    """Inductor writes TORCHINDUCTOR_CACHE_DIR into os.environ when it first needs its cache:
    a process's misses before and after that must reach one service."""
    import os

    from torch._inductor.runtime import cache_dir_utils

    # setenv first, so that the variable Inductor sets is removed again afterwards.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "unset below")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    client._folders.clear()
    before = client.folder_for(os.environ)
    cache_dir_utils.cache_dir()  # what Inductor's first compile does
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == cache_dir_utils.default_cache_dir()
    assert client.folder_for(os.environ) == before
    client._folders.clear()


def test_processes_with_the_same_inductor_cache_folder_share_a_service(tmp_path):
    """Named as set or left to Inductor's default, relative or absolute: one folder, one
    service; another folder, another service (its workers would fill another cache)."""
    import os

    from torch._inductor.runtime import cache_dir_utils

    base = {"EAGERC_CACHE_DIR": "/tmp/somewhere"}
    default = dict(base, TORCHINDUCTOR_CACHE_DIR=cache_dir_utils.default_cache_dir())
    assert client.identity(base) == client.identity(default)
    relative = dict(base, TORCHINDUCTOR_CACHE_DIR=os.path.relpath(tmp_path))
    absolute = dict(base, TORCHINDUCTOR_CACHE_DIR=str(tmp_path))
    assert client.identity(relative) == client.identity(absolute) != client.identity(base)
