# SPDX-License-Identifier: MIT
"""The Python client's logs, metrics, files passed as fds, pipelined run_many and the
package's version, against a real fiberd (conftest.py; log_lines.so is in its plugins)."""
import hashlib
import os
import re
import time

import pytest

import fiberd
from fiberd import Client, Fd, FiberdError

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_package_version_is_fiberds(client):
    with open(os.path.join(TOP, "ipc", "protocol.h")) as f:
        want = re.search(r'#define FIBERD_VERSION "([^"]+)"', f.read()).group(1)
    assert fiberd.__version__ == want == client.ping()["version"]


def test_logs_gives_the_lines_oldest_first(client):
    rec = client.run("log_lines", {"n": 3, "text": "hello"})
    assert rec["state"] == "done"
    logs = client.logs(rec["id"])
    assert [l["text"] for l in logs["lines"]] == ["hello 1", "hello 2", "hello 3"]
    assert logs["dropped"] == 0 and all(l["level"] == 6 for l in logs["lines"])


def test_follow_logs_sees_lines_while_the_job_runs(client):
    job = client.submit("log_lines", {"n": 4, "delay_ms": 50})
    seen = []
    for line in client.logs(job, follow=True, poll=0.02):
        seen.append(line["text"])
        if len(seen) == 1:  # the job is still logging: it takes 200 ms
            assert client.status(job)["state"] in ("queued", "running")
    assert seen == ["line 1", "line 2", "line 3", "line 4"]
    assert client.status(job)["state"] == "done"


def test_follow_logs_counts_the_lines_fiberd_let_go(client):
    job = client.submit("log_lines", {"n": 100})
    client.wait(job, timeout=30)
    it = client.follow_logs(job)
    lines = list(it)
    assert sum(l["missed"] for l in lines) + len(lines) == 100
    assert len(lines) == 64 and lines[0]["missed"] == 36 and lines[-1]["text"] == "line 100"


def test_logs_of_a_job_that_does_not_exist(client):
    with pytest.raises(FiberdError) as e:
        client.logs(999999)
    assert e.value.code == "NOT_FOUND"


def test_metrics_in_both_formats(client):
    client.run("echo", {})
    text = client.metrics()
    assert text.endswith("# EOF\n") and 'fiberd_jobs_submitted_total{plugin="echo"}' in text
    prom = client.metrics("prometheus")
    assert "# EOF" not in prom and "# TYPE fiberd_jobs_submitted_total counter" in prom
    with pytest.raises(FiberdError) as e:
        client.metrics("xml")
    assert e.value.code == "INVALID_ARGUMENT"
    assert client.stats()["process"]["open_fds"] > 0


def test_a_file_passed_as_an_fd_is_hashed_with_the_clients_rights(client, tmp_path):
    data = os.urandom(100000)
    path = tmp_path / "blob"
    path.write_bytes(data)
    os.chmod(tmp_path, 0o700)
    with open(path, "rb") as f:
        rec = client.run("sha256", {"path": Fd(f)})
    assert rec["state"] == "done", rec
    assert rec["result"]["sha256"] == hashlib.sha256(data).hexdigest()
    assert rec["result"]["bytes"] == len(data) and rec["result"]["path"] != str(path)


def test_fds_go_with_their_own_request_in_a_pipeline(client, tmp_path):
    """Three requests queued together, two passing different files: each job hashes its
    own file, and our descriptors may be closed before the requests are written."""
    want = []
    msgids = []
    for i in range(2):
        p = tmp_path / ("f%d" % i)
        p.write_bytes(b"file %d" % i)
        want.append(hashlib.sha256(b"file %d" % i).hexdigest())
        with open(p, "rb") as f:
            msgids.append(client.send("job.run", "sha256", {"path": Fd(f)}, {}, None))
        if i == 0:
            msgids.append(client.send("ping"))
    got = [client.wait_reply(m) for m in msgids]
    assert [got[0]["result"]["sha256"], got[2]["result"]["sha256"]] == want
    assert got[1]["protocol"] == 1


def test_an_fd_index_not_sent_is_refused_and_the_connection_stays(client):
    import msgpack
    ext = msgpack.ExtType(1, b"\x00\x00\x00\x05")
    with pytest.raises(FiberdError) as e:
        client.call("job.submit", "sha256", {"path": ext}, {})
    assert e.value.code == "INVALID_ARGUMENT"
    assert client.ping()["protocol"] == 1


def test_run_many_answers_in_the_order_asked(client):
    recs = client.run_many([("echo", {"i": i}) for i in range(300)] +
                           [{"plugin": "echo", "args": {"i": 300}, "priority": 1}])
    assert [r["result"]["i"] for r in recs] == list(range(301))
    assert all(r["state"] == "done" for r in recs)


def test_run_many_with_a_window_and_a_refused_job(client):
    jobs = [("echo", {"i": 0}), ("no-such-plugin", {}), ("echo", {"i": 2})]
    with pytest.raises(FiberdError) as e:
        client.run_many(jobs, window=2)
    assert e.value.code == "NOT_FOUND"
    out = client.run_many(jobs, return_exceptions=True)
    assert out[0]["result"] == {"i": 0} and out[2]["result"] == {"i": 2}
    assert isinstance(out[1], FiberdError) and out[1].code == "NOT_FOUND"
    assert client.ping()["protocol"] == 1  # no answer left over to confuse the next call


def test_run_many_is_pipelined(fiberd):
    """Every request is written before the first answer is read: 200 jobs that each
    sleep 50 ms on one worker... would take 10 s one by one; sleep jobs overlap (they
    park their fiber), so pipelined they take about one sleep."""
    with Client(fiberd, timeout=30) as c:
        t0 = time.monotonic()
        recs = c.run_many([("sleep", {"ms": 50})] * 200)
        took = time.monotonic() - t0
    assert all(r["state"] == "done" for r in recs)
    assert took < 5, "200 sleeps of 50 ms took %.1f s: not in flight together" % took
