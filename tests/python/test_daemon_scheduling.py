# SPDX-License-Identifier: MIT
"""The Python client's job scheduling against a real fiberd (PROTOCOL.md, "Scheduling
jobs"), the schedule.* methods included; `make check-python` runs it. Without a daemon,
the same calls are checked by test_scheduling.py against a fake."""
import datetime
import time

import pytest

from fiberd import FiberdError


def test_a_delayed_job_is_scheduled_then_runs(client):
    before_ms = int(time.time() * 1000)
    job = client.submit("echo", {"n": 1}, delay_ms=1500)
    rec = client.status(job)
    assert rec["state"] == "scheduled" and rec["run_at_ms"] >= before_ms + 1500
    assert client.wait(job, timeout=30)["state"] == "done"


def test_run_at_in_the_past_runs_now(client):
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    assert client.run("echo", {}, run_at=past)["state"] == "done"


def test_after_waits_for_the_jobs(client):
    first = client.submit("sleep", {"ms": 600000})
    then = client.submit("echo", {}, after=[first])
    rec = client.status(then)
    assert rec["state"] == "waiting" and rec["after"] == [first]
    client.cancel(first)
    rec = client.wait(then, timeout=30)
    assert rec["state"] == "failed" and rec["error"]["code"] == "FAILED_PRECONDITION"


def test_a_key_answers_the_first_jobs_id(client):
    a = client.submit("sleep", {"ms": 600000}, key="py-k1")
    assert client.submit("sleep", {"ms": 600000}, key="py-k1") == a
    assert client.call("job.submit", "sleep", {"ms": 600000}, {"key": "py-k1"})["existing"] is True
    client.cancel(a)


def test_retry_and_discard_a_failed_job(client):
    job = client.submit("sha256", {"path": "/nonexistent/file"}, max_attempts=1)
    assert client.wait(job, timeout=30)["state"] == "failed"
    assert client.retry(job) == [job]
    rec = client.wait(job, timeout=30)
    assert rec["state"] == "failed" and rec["attempt"] == 0 and rec["errors"]
    assert client.discard(job) == [job]
    with pytest.raises(FiberdError) as e:
        client.status(job)
    assert e.value.code == "NOT_FOUND"
    assert list(client.list(state="dead")) == []
    assert client.retry(all=True) == []


def test_pause_holds_a_class(client):
    assert client.pause("class", "default")["paused"] is True
    job = client.submit("echo", {})
    assert client.wait(job, timeout=0.3)["state"] == "queued"
    assert client.resume("class", "default")["paused"] is False
    assert client.wait(job, timeout=30)["state"] == "done"


def test_a_schedule_submits_at_its_ticks(client):
    s = client.schedule_add("py-tick", "echo", {"n": 1}, every_ms=1000, max_attempts=2)
    assert s["name"] == "py-tick" and s["every_ms"] == 1000 and s["paused"] is False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        mine = [x for x in client.schedule_list() if x["name"] == "py-tick"]
        if mine and mine[0]["last_job"]:
            break
        time.sleep(0.1)
    else:
        pytest.fail("no tick in 10 s: %r" % (mine,))
    rec = client.wait(mine[0]["last_job"], timeout=30)
    assert rec["state"] == "done" and rec["key"].startswith("schedule:py-tick:")
    assert client.schedule_pause("py-tick")["paused"] is True
    assert client.schedule_resume("py-tick")["paused"] is False
    assert client.schedule_remove("py-tick")["name"] == "py-tick"
    with pytest.raises(FiberdError) as e:
        client.schedule_remove("py-tick")
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(FiberdError) as e:
        client.schedule_add("py-bad", "echo", cron="not a cron")
    assert e.value.code == "INVALID_ARGUMENT"
