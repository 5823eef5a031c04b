# SPDX-License-Identifier: MIT
"""`make bench-python`: what pipelining buys a Python program. N trivial echo jobs
(default 10,000) against the fiberd on SOCKET, four ways: submit() then wait() per job,
run() per job (one round trip each), Client.run_many() and fiberd.aio's run_many()
(every request written before the first answer is read). Prints jobs/s and ms per job;
fails when a job does not end done. Usage: bench_run_many.py SOCKET [N]"""
import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "client", "python"))
from fiberd import Client, aio  # noqa: E402


def main():
    sock, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    jobs = [("echo", {"i": i}) for i in range(n)]
    rows = []
    with Client(sock, timeout=120) as c:
        c.run("echo", {})  # warm: the connection and the plugin
        t = time.monotonic()
        for plugin, args in jobs:
            assert c.wait(c.submit(plugin, args))["state"] == "done"
        rows.append(("submit + wait, one at a time", time.monotonic() - t))
        t = time.monotonic()
        for plugin, args in jobs:
            assert c.run(plugin, args)["state"] == "done"
        rows.append(("run, one at a time", time.monotonic() - t))
        t = time.monotonic()
        assert all(r["state"] == "done" for r in c.run_many(jobs))
        rows.append(("run_many", time.monotonic() - t))

    async def amain():
        async with await aio.connect(sock, timeout=120) as a:
            t0 = time.monotonic()
            assert all(r["state"] == "done" for r in await a.run_many(jobs))
            return time.monotonic() - t0
    rows.append(("aio run_many", asyncio.run(amain())))
    for name, s in rows:
        print("%-30s %8.0f jobs/s %8.3f ms a job" % (name, n / s, s / n * 1000))


if __name__ == "__main__":
    main()
