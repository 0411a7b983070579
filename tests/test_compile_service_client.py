"""The caller's side of the compile service (eagerc/compile_service/client.py): a job's
file is written by the client's own thread, never on the caller's (a miss path does no
file system call for it), and a job whose file cannot be written fails, so its call
compiles in the caller."""
import os
import threading

from eagerc.compile_service import client, spool


def _client_with_a_live_service(monkeypatch) -> client.Client:
    monkeypatch.setattr(client.Client, "ensure_service", lambda self, folder, now=None: True)
    return client.Client()


def test_a_jobs_file_is_written_off_the_callers_thread(tmp_path, monkeypatch):
    writers = []
    real_queue = client._queue

    def queue(folder, job_id, data):
        writers.append(threading.current_thread())
        real_queue(folder, job_id, data)

    monkeypatch.setattr(client, "_queue", queue)
    c = _client_with_a_live_service(monkeypatch)
    folder = str(tmp_path / "service")
    assert c.submit(folder, "job-a", b"description")
    assert c.outcome(folder, "job-a") is None  # being written, or queued: no outcome yet
    assert c.flush(10)
    assert writers and threading.current_thread() not in writers
    with open(spool.job_path(folder, spool.QUEUED, "job-a"), "rb") as f:
        assert f.read() == b"description"
    assert c.outcome(folder, "job-a") is None  # queued, not finished
    spool.finish(folder, "job-a", True)
    c._finished.clear()  # the next question lists the folder again (not POLL_S later)
    assert c.outcome(folder, "job-a") == {"ok": True, "why": ""}


def test_a_job_whose_folder_cannot_be_written_fails(tmp_path, monkeypatch):
    c = _client_with_a_live_service(monkeypatch)
    folder = str(tmp_path / "service")
    assert c.submit(folder, "job-b", b"x")
    assert c.flush(10)
    # The queue folder replaced by a file: the next job's file cannot be written.
    os.rename(os.path.join(folder, spool.QUEUED), os.path.join(folder, "moved"))
    open(os.path.join(folder, spool.QUEUED), "w").close()
    assert c.submit(folder, "job-c", b"y")
    assert c.flush(10)
    outcome = c.outcome(folder, "job-c")
    assert outcome is not None and not outcome["ok"] and "could not be queued" in outcome["why"]


def test_without_a_service_a_job_is_not_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(client.Client, "ensure_service", lambda self, folder, now=None: False)
    assert not client.Client().submit(str(tmp_path / "service"), "job-d", b"z")
