# SPDX-License-Identifier: MIT
"""The Python client (client/python/fiberd/client.py) against a real fiberd."""
import os
import socket

import pytest

from fiberd import CODES, Client, FiberdError


def test_ping_says_version_and_protocol(client):
    info = client.ping()
    assert info["protocol"] == 1
    assert isinstance(info["version"], str) and info["pid"] > 0


def test_plugins_lists_the_bundled_ones(client):
    names = {p["name"] for p in client.plugins()["plugins"]}
    assert {"echo", "sleep", "sha256"} <= names


def test_submit_then_wait_gives_the_result(client):
    job = client.submit("echo", {"word": "fiber", "n": 3})
    assert isinstance(job, int) and job > 0
    rec = client.wait(job, timeout=30)
    assert rec["state"] == "done"
    assert rec["result"] == {"word": "fiber", "n": 3}
    assert client.status(job)["state"] == "done"
    assert client.result(job) == {"word": "fiber", "n": 3}


def test_run_submits_and_waits_in_one_call(client):
    rec = client.run("echo", {"x": 1}, priority=0)
    assert rec["state"] == "done" and rec["result"] == {"x": 1}


def test_fields_answer_only_the_keys_asked(client):
    rec = client.run("echo", {"x": 1}, fields=("result",))
    assert set(rec) == {"id", "state", "result"} and rec["result"] == {"x": 1}
    assert set(client.wait(rec["id"], fields="error")) == {"id", "state", "error"}
    assert "plugin" in client.wait(rec["id"])  # no fields: the whole record
    recs = client.run_many([("echo", {"i": i}) for i in range(3)], fields=["result"])
    assert [sorted(r) for r in recs] == [["id", "result", "state"]] * 3
    with pytest.raises(FiberdError) as e:
        client.run("echo", {}, fields=["bogus"])
    assert e.value.code == "INVALID_ARGUMENT" and "bogus" in str(e.value)


def test_wait_with_a_timeout_gives_the_record_not_final(client):
    job = client.submit("sleep", {"ms": 3600000})
    rec = client.wait(job, timeout=0)
    assert rec["state"] in ("queued", "running")
    rec = client.cancel(job)
    assert client.wait(job)["state"] == "cancelled"


def test_answers_come_out_of_order(client):
    job = client.submit("sleep", {"ms": 3600000})
    wait_id = client.send("job.wait", job, None)  # cannot end before the cancel below
    ping_id = client.send("ping")
    msgid, err, result = client.receive(timeout=30)
    assert (msgid, err) == (ping_id, None) and result["protocol"] == 1
    client.cancel(job)  # its answer overtakes the wait's, which is kept for receive()
    msgid, err, rec = client.receive(timeout=30)
    assert msgid == wait_id and err is None and rec["state"] == "cancelled"


def test_errors_carry_the_protocol_code(client):
    with pytest.raises(FiberdError) as e:
        client.status(999999)
    assert e.value.code == "NOT_FOUND" and e.value.code in CODES
    assert "999999" in e.value.message
    with pytest.raises(FiberdError) as e:
        client.submit("no-such-plugin", {})
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(FiberdError) as e:
        client.call("no.such.method")
    assert e.value.code == "METHOD_NOT_FOUND"


def test_bad_args_are_refused_or_fail_the_job_as_invalid_argument(client):
    try:
        rec = client.run("sleep", {"ms": "soon"})
    except FiberdError as e:  # a daemon whose plugins check args at submission
        assert e.code == "INVALID_ARGUMENT"
    else:
        assert rec["state"] == "failed" and rec["error"]["code"] == "INVALID_ARGUMENT"


def test_list_walks_every_page(client):
    ids = [client.submit("echo", {"i": i}) for i in range(5)]
    for job in ids:
        client.wait(job)
    seen = [rec["id"] for rec in client.list(plugin="echo", page_size=2)]
    assert set(ids) <= set(seen)
    assert seen == sorted(seen, reverse=True), "newest first"
    assert len(seen) == len(set(seen)), "no record twice across pages"
    done = list(client.list(state="done", page_size=1000))
    assert all(rec["state"] == "done" for rec in done)


def test_stats_counts_jobs(client):
    stats = client.stats()
    assert stats["jobs"]["submitted"] >= 1 and "groups" in stats


def test_a_timeout_here_is_deadline_exceeded(tmp_path):
    path = str(tmp_path / "silent.sock")
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(path)
    silent.listen(1)  # accepts nobody: the request is never answered
    try:
        with Client(path) as c:
            with pytest.raises(FiberdError) as e:
                c.ping(timeout=0.05)
            assert e.value.code == "DEADLINE_EXCEEDED"
    finally:
        silent.close()


def test_no_daemon_is_unavailable(tmp_path):
    with pytest.raises(FiberdError) as e:
        Client(str(tmp_path / "nothing.sock"))
    assert e.value.code == "UNAVAILABLE" and "nothing.sock" in e.value.message


def test_default_socket_follows_fiberd_socket(monkeypatch, fiberd):
    monkeypatch.setenv("FIBERD_SOCKET", fiberd)
    with Client() as c:
        assert c.path == fiberd and c.ping()["protocol"] == 1
    monkeypatch.delenv("FIBERD_SOCKET")
    from fiberd.client import default_socket
    assert default_socket() == "/run/fiberd.sock"
