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
