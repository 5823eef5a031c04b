# SPDX-License-Identifier: MIT
"""The Python client's job scheduling side (PROTOCOL.md, "Scheduling jobs") without a
fiberd: job_options() as a pure function, and what submit(), retry(), pause(),
schedule_add()... send, read by a fake server (a thread on a temp socket that records
each request and answers the shapes the protocol gives). The same against a real fiberd
is test_daemon_scheduling.py."""
import datetime
import socket
import threading

import msgpack
import pytest

from fiberd import Client, FiberdError, job_options


# -- job_options(): pure ---------------------------------------------------------------

def test_job_options_names_them_as_the_protocol_does():
    assert job_options() == {}
    assert job_options(priority=-1, timeout_ms=5000, job_class="batch", delay_ms=5400000,
                       max_attempts=3, backoff_ms=500, backoff_max_ms=120000, after=[3, 4],
                       key="k1") == {
        "priority": -1, "timeout_ms": 5000, "class": "batch", "delay_ms": 5400000,
        "max_attempts": 3, "backoff_ms": 500, "backoff_max_ms": 120000, "after": [3, 4],
        "key": "k1"}
    assert job_options(after=(i for i in (5, 6))) == {"after": [5, 6]}
    assert job_options(after=7) == {"after": [7]}
    assert job_options(newer_option=1) == {"newer_option": 1}, "unknown ones pass through"


def test_run_at_takes_epoch_ms_or_a_datetime_with_a_zone():
    utc = datetime.timezone.utc
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    assert job_options(run_at=1796094000000) == {"run_at": 1796094000000}
    assert job_options(run_at=datetime.datetime(2026, 12, 1, 3, tzinfo=utc)) == {"run_at": 1796094000000}
    assert job_options(run_at=datetime.datetime(2026, 12, 1, 3, tzinfo=plus2)) == {"run_at": 1796086800000}
    with pytest.raises(ValueError, match="no time zone"):
        job_options(run_at=datetime.datetime(2026, 12, 1, 3))


@pytest.mark.parametrize("kwargs, said", [
    ({"delay_ms": 5, "run_at": 6}, "both say when"),
    ({"delay_ms": -1}, "delay_ms="),
    ({"delay_ms": 1.5}, "delay_ms="),
    ({"max_attempts": "3"}, "max_attempts="),
    ({"after": ["#1"]}, "after="),
    ({"after": [True]}, "after="),
    ({"key": 5}, "key="),
    ({"priority": "high"}, "priority="),
])
def test_bad_option_values_are_refused_naming_them(kwargs, said):
    with pytest.raises(ValueError, match=said):
        job_options(**kwargs)


# -- a fake fiberd -----------------------------------------------------------------------

class FakeFiberd:
    """Accepts one client at a time; records each request as [method, params] in
    .requests and answers with what the protocol says the method gives."""

    def __init__(self, path):
        self.path = path
        self.requests = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _answer(self, method, params):
        if method in ("job.submit",):
            return {"id": 7}
        if method == "job.run":
            return {"id": 7, "state": "done"}
        if method in ("job.retry", "job.discard"):
            ids = params[0] if isinstance(params[0], list) else [41]
            return {"retried" if method == "job.retry" else "discarded": ids}
        if method in ("pause", "resume"):
            return {"kind": params[0], "name": params[1], "paused": method == "pause", "queued": 2}
        if method == "schedule.list":
            return [{"name": "nightly"}]
        if method.startswith("schedule."):
            if params[0] == "missing":
                raise LookupError("no schedule missing of yours")
            return {"name": params[0], "paused": method == "schedule.pause"}
        raise KeyError(method)

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            unpacker = msgpack.Unpacker(raw=False)
            with conn:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    unpacker.feed(data)
                    for msg in unpacker:
                        _, msgid, method, params = msg
                        self.requests.append([method, params])
                        try:
                            reply = [1, msgid, None, self._answer(method, params)]
                        except LookupError as e:
                            reply = [1, msgid, {"code": "NOT_FOUND", "message": str(e.args[0])}, None]
                        conn.sendall(msgpack.packb(reply, use_bin_type=True))

    def close(self):
        self.sock.close()


@pytest.fixture
def fake(tmp_path):
    f = FakeFiberd(str(tmp_path / "fake.sock"))
    yield f
    f.close()


@pytest.fixture
def fc(fake):
    with Client(fake.path, timeout=10) as c:
        yield c


def test_submit_and_run_send_the_options(fake, fc):
    assert fc.submit("echo", {"x": 1}, delay_ms=5400000, max_attempts=3, backoff_ms=500,
                     backoff_max_ms=120000, after=[3, 4], key="k1", job_class="batch") == 7
    assert fake.requests[-1] == ["job.submit", ["echo", {"x": 1}, {
        "class": "batch", "delay_ms": 5400000, "max_attempts": 3, "backoff_ms": 500,
        "backoff_max_ms": 120000, "after": [3, 4], "key": "k1"}]]
    at = datetime.datetime(2026, 12, 1, 3, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    assert fc.run("echo", run_at=at)["state"] == "done"
    assert fake.requests[-1] == ["job.run", ["echo", {}, {"run_at": 1796086800000}, None]]
    fc.submit("echo", **{"class": "batch"})
    assert fake.requests[-1][1][2] == {"class": "batch"}, "the protocol's own spelling works"
    with pytest.raises(ValueError):
        fc.submit("echo", run_at=datetime.datetime(2026, 12, 1, 3))
    assert len(fake.requests) == 3, "a refused option sent nothing"


def test_retry_discard_pause_resume_send_what_the_protocol_says(fake, fc):
    assert fc.retry(41, 42) == [41, 42]
    assert fake.requests[-1] == ["job.retry", [[41, 42]]]
    assert fc.retry([43]) == [43]
    assert fake.requests[-1] == ["job.retry", [[43]]]
    assert fc.retry(all=True) == [41]
    assert fake.requests[-1] == ["job.retry", [{"all": True}]]
    assert fc.discard(5) == [5]
    assert fake.requests[-1] == ["job.discard", [[5]]]
    assert fc.discard(all=True) == [41]
    for bad in ((), (1,)):
        with pytest.raises(ValueError):
            fc.retry(*bad, all=bool(bad))
    with pytest.raises(ValueError):
        fc.retry()
    assert fc.pause("class", "batch") == {"kind": "class", "name": "batch", "paused": True, "queued": 2}
    assert fake.requests[-1] == ["pause", ["class", "batch"]]
    assert fc.resume("plugin", "sleep")["paused"] is False
    assert fake.requests[-1] == ["resume", ["plugin", "sleep"]]
    with pytest.raises(ValueError):
        fc.pause("queue", "x")


def test_schedule_methods_send_what_the_protocol_says(fake, fc):
    s = fc.schedule_add("nightly", "sha256", {"path": "/etc/hostname"}, cron="0 3 * * *",
                        tz="Europe/Berlin", missed="run_once", max_attempts=2)
    assert s["name"] == "nightly"
    assert fake.requests[-1] == ["schedule.add", [
        "nightly", {"cron": "0 3 * * *", "tz": "Europe/Berlin", "missed": "run_once"}, "sha256",
        {"path": "/etc/hostname"}, {"max_attempts": 2}]]
    fc.schedule_add("often", "echo", every_ms=300000)
    assert fake.requests[-1] == ["schedule.add", ["often", {"every_ms": 300000}, "echo", {}, {}]]
    assert fc.schedule_list() == [{"name": "nightly"}]
    assert fake.requests[-1] == ["schedule.list", []]
    assert fc.schedule_pause("nightly")["paused"] is True
    assert fake.requests[-1] == ["schedule.pause", ["nightly"]]
    fc.schedule_resume("nightly")
    assert fake.requests[-1] == ["schedule.resume", ["nightly"]]
    fc.schedule_remove("nightly", owner=1000)
    assert fake.requests[-1] == ["schedule.remove", ["nightly", 1000]]
    with pytest.raises(FiberdError) as e:
        fc.schedule_remove("missing")
    assert e.value.code == "NOT_FOUND"
    sent = len(fake.requests)
    for bad in ({}, {"cron": "@daily", "every_ms": 1000}, {"every_ms": 1000, "tz": "UTC"},
                {"cron": "@daily", "missed": "sometimes"}, {"every_ms": "5m"}):
        with pytest.raises(ValueError):
            fc.schedule_add("x", "echo", **bad)
    assert len(fake.requests) == sent, "refused before sending"
