# SPDX-License-Identifier: MIT
"""fiberd.aio, the asyncio client, against a real fiberd (conftest.py). Each test runs
its own event loop with asyncio.run (pytest-asyncio is not a Debian 12 dependency here)."""
import asyncio
import hashlib
import os

import pytest

from fiberd import aio
from fiberd import Fd, FiberdError


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_connect_submit_wait_run(fiberd):
    async def main():
        async with await aio.connect(fiberd, timeout=30) as c:
            assert (await c.ping())["protocol"] == 1
            job = await c.submit("echo", {"w": "aio"})
            rec = await c.wait(job, timeout=10)
            assert rec["state"] == "done" and rec["result"] == {"w": "aio"}
            assert (await c.run("echo", {"x": 1}, job_class="default"))["class"] == "default"
            assert await c.result(job) == {"w": "aio"}
            rec = await c.run("echo", {"x": 2}, fields=["result"])
            assert set(rec) == {"id", "state", "result"} and rec["result"] == {"x": 2}
            assert set(await c.wait(job, fields=())) == {"id", "state"}
            recs = await c.run_many([("echo", {"i": 1})], fields=["error"])
            assert set(recs[0]) == {"id", "state", "error"}
    run(main())


def test_calls_from_many_coroutines_are_in_flight_together(fiberd):
    """A job.wait that cannot end until the job is cancelled does not hold up a ping
    asked after it on the same connection."""
    async def main():
        async with await aio.connect(fiberd, timeout=30) as c:
            job = await c.submit("sleep", {"ms": 3600000})
            waiting = asyncio.ensure_future(c.wait(job))
            assert (await c.ping())["protocol"] == 1
            assert not waiting.done()
            await c.cancel(job)
            assert (await waiting)["state"] == "cancelled"
    run(main())


def test_errors_are_fiberd_errors(fiberd):
    async def main():
        async with await aio.connect(fiberd, timeout=30) as c:
            with pytest.raises(FiberdError) as e:
                await c.status(999999)
            assert e.value.code == "NOT_FOUND"
            slow = await c.submit("sleep", {"ms": 3600000})
            with pytest.raises(FiberdError) as e:
                await c.call("job.wait", slow, None, timeout=0.05)
            assert e.value.code == "DEADLINE_EXCEEDED"
            assert (await c.ping())["protocol"] == 1
            await c.cancel(slow)  # its late job.wait answer is dropped, not misread
            assert (await c.ping())["protocol"] == 1
    run(main())


def test_connect_to_nothing_is_unavailable(tmp_path):
    async def main():
        with pytest.raises(FiberdError) as e:
            await aio.connect(str(tmp_path / "none.sock"))
        assert e.value.code == "UNAVAILABLE"
    run(main())


def test_run_many_logs_metrics_and_a_passed_file(fiberd, tmp_path):
    data = os.urandom(50000)
    (tmp_path / "blob").write_bytes(data)

    async def main():
        async with await aio.connect(fiberd, timeout=30) as c:
            recs = await c.run_many([("echo", {"i": i}) for i in range(500)])
            assert [r["result"]["i"] for r in recs] == list(range(500))
            job = await c.submit("log_lines", {"n": 3, "delay_ms": 30})
            assert [l["text"] async for l in c.follow_logs(job, poll=0.02)] == \
                ["line 1", "line 2", "line 3"]
            assert len((await c.logs(job))["lines"]) == 3
            assert (await c.metrics()).endswith("# EOF\n")
            with open(tmp_path / "blob", "rb") as f:
                rec = await c.run("sha256", {"path": Fd(f)})
            assert rec["result"]["sha256"] == hashlib.sha256(data).hexdigest()
            assert len([r async for r in c.list(plugin="echo", page_size=100)]) >= 500
    run(main())


def test_fiberd_going_away_fails_the_calls_in_flight(tmp_path):
    """A server that closes the connection: the call waiting raises UNAVAILABLE, at once."""
    path = str(tmp_path / "fake.sock")

    async def main():
        async def serve(reader, writer):
            await reader.read(1)
            writer.close()
        server = await asyncio.start_unix_server(serve, path)
        async with server:
            c = await aio.connect(path)
            with pytest.raises(FiberdError) as e:
                await c.call("ping", timeout=10)
            assert e.value.code == "UNAVAILABLE"
            with pytest.raises(FiberdError):
                await c.ping()
            await c.close()
    run(main())
