# SPDX-License-Identifier: MIT
"""fiberd.aio — fiberd's Python client for asyncio: fiberd.client's calls as coroutines.

One AsyncClient is one connection to fiberd's Unix socket; any number of coroutines may
call it at once, and their requests are in flight together (MessagePack-RPC msgids; fiberd
answers in any order)::

    import asyncio, fiberd.aio

    async def main():
        async with await fiberd.aio.connect() as c:   # $FIBERD_SOCKET, else /run/fiberd.sock
            job = await c.submit("sha256", {"path": "/etc/hostname"})
            rec = await c.wait(job, timeout=10)
            recs = await c.run_many([("echo", {"n": i}) for i in range(1000)])
            async for line in c.follow_logs(job):
                print(line["text"])
    asyncio.run(main())

The methods and their arguments are fiberd.client.Client's (submit, run, status, wait,
result, cancel, list, logs, follow_logs, stats, metrics, ping, plugins, retry, discard,
pause, resume, schedule_*), errors the same FiberdError, files passed the same way
(fiberd.Fd in a job's args). Timeouts are seconds: timeout= on a call (None: the
client's default, connect(timeout=); None there: no limit) bounds the wait for its answer,
and an answer that comes later is dropped.

How: a non-blocking socket read by one task (loop.sock_recv) that hands each answer to the
future of its msgid; requests are packed into an outbox written with send(), or sendmsg()
for a request that passes files (asyncio's streams cannot attach SCM_RIGHTS), by one
writer that waits for the socket with loop.add_writer when it is full. A broken
connection fails every call in flight with UNAVAILABLE (or the code of fiberd's
connection.error notice). Use a client from the event loop it was made on only.
"""

import asyncio
import errno
import socket as _socket

from fiberd import client as _sync
from fiberd._wire import (FINAL_STATES, NOTIFICATION, RESPONSE, Fd, Outbox, lines_past,
                          new_unpacker, pack_request)
from fiberd.client import FiberdError, default_socket, job_options

__all__ = ["AsyncClient", "Fd", "FiberdError", "connect"]

_READ_CHUNK = 65536


async def connect(socket=None, timeout=None):
    """Connect to fiberd at @socket (None: default_socket()); @timeout: the default
    seconds any call waits for its answer (None: no limit). Returns an AsyncClient.
    Raises FiberdError("UNAVAILABLE") when nothing listens there, PERMISSION_DENIED when
    the socket is not yours to use."""
    c = AsyncClient(socket, timeout)
    await c._connect()
    return c


class AsyncClient:
    """One connection to fiberd for asyncio; make it with connect()."""

    def __init__(self, socket=None, timeout=None):
        self.path = socket or default_socket()
        self.timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._sock = None
        self._next_msgid = 1
        self._pending = {}  # msgid -> future of (error, result)
        self._out = Outbox()
        self._writing = False
        self._reader = None
        self._broken = None  # the FiberdError every later call raises, once broken

    async def _connect(self):
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self._sock.setblocking(False)
        try:
            await self._loop.sock_connect(self._sock, self.path)
        except OSError as e:
            self._sock.close()
            code = "PERMISSION_DENIED" if e.errno in (errno.EACCES, errno.EPERM) else "UNAVAILABLE"
            raise FiberdError(code, "cannot connect to %s: %s — is fiberd running? (set "
                              "FIBERD_SOCKET or pass socket= to use another socket)"
                              % (self.path, e.strerror)) from None
        self._reader = self._loop.create_task(self._read_loop())

    # -- the connection -------------------------------------------------------------

    async def close(self):
        """Close the connection; calls in flight raise UNAVAILABLE. Idempotent."""
        self._break(FiberdError("UNAVAILABLE", "the connection to %s is closed" % self.path))
        if self._reader is not None and self._reader is not asyncio.current_task():
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
            self._reader = None

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    def _break(self, error):
        if self._broken is not None:
            return
        self._broken = error
        if self._writing:
            self._loop.remove_writer(self._sock.fileno())
            self._writing = False
        self._out.clear()
        self._sock.close()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(error)
        self._pending.clear()

    async def _read_loop(self):
        unpacker = new_unpacker(_sync._MAX_MESSAGE)
        try:
            while True:
                data = await self._loop.sock_recv(self._sock, _READ_CHUNK)
                if not data:
                    raise FiberdError("UNAVAILABLE", "fiberd closed the connection on %s (it "
                                      "does after a protocol error, or when it stops)" % self.path)
                unpacker.feed(data)
                for msg in unpacker:
                    self._dispatch(msg)
        except FiberdError as e:
            self._break(e)
        except OSError as e:
            self._break(FiberdError("UNAVAILABLE", "reading from %s: %s" % (self.path, e.strerror)))
        except Exception as e:  # noqa: BLE001 - a message this client cannot read
            self._break(FiberdError("MALFORMED_MESSAGE", "fiberd sent what this client "
                                    "cannot read: %s" % e))

    def _dispatch(self, msg):
        if isinstance(msg, list) and len(msg) == 4 and msg[0] == RESPONSE:
            fut = self._pending.pop(msg[1], None)
            if fut is not None and not fut.done():  # else: a call that timed out
                fut.set_result((msg[2], msg[3]))
            return
        if isinstance(msg, list) and len(msg) == 3 and msg[0] == NOTIFICATION:
            if msg[1] == "connection.error":
                e = _sync._error_from_wire(msg[2][0] if msg[2] else None)
                raise FiberdError(e.code, "fiberd closed the connection: %s" % e.message)
            return  # a notification this client does not know
        raise FiberdError("MALFORMED_MESSAGE", "fiberd sent a message this client cannot "
                          "read: %r" % (msg,))

    def _write(self):
        """Write what the socket takes now; the rest when it is writable again."""
        try:
            while len(self._out):
                self._out.write_some(self._sock)
        except BlockingIOError:
            if not self._writing:
                self._writing = True
                self._loop.add_writer(self._sock.fileno(), self._on_writable)
            return
        except OSError as e:
            # what fiberd said before closing is still read: the reader breaks the rest
            self._out.clear()
            if not isinstance(e, (BrokenPipeError, ConnectionResetError)):
                self._break(FiberdError("UNAVAILABLE", "writing to %s: %s" % (self.path, e.strerror)))
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._sock.fileno())

    def _on_writable(self):
        self._write()

    # -- requests ---------------------------------------------------------------------

    def send(self, method, *params):
        """Queue method(params...) and start writing it; returns a future of
        (error or None, result), error a FiberdError-shaped map as fiberd sent it."""
        if self._broken is not None:
            raise FiberdError(self._broken.code, self._broken.message)
        msgid = self._next_msgid
        data, fds = pack_request(msgid, method, params)
        self._out.add(data, fds)
        self._next_msgid = 1 if msgid >= 0xFFFFFFFF else msgid + 1
        fut = self._loop.create_future()
        self._pending[msgid] = fut
        if not self._writing:
            self._write()
        return msgid, fut

    async def _answer(self, msgid, fut, timeout):
        if timeout is None:
            timeout = self.timeout
        try:
            err, result = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self._pending.pop(msgid, None)
            raise FiberdError("DEADLINE_EXCEEDED", "no answer from fiberd on %s in time"
                              % self.path) from None
        if err is not None:
            raise _sync._error_from_wire(err)
        return result

    async def call(self, method, *params, timeout=None):
        """Send method(params...) and wait for its answer: the result, or its error
        raised as FiberdError."""
        msgid, fut = self.send(method, *params)
        return await self._answer(msgid, fut, timeout)

    # -- the methods (fiberd.client.Client's, as coroutines) ----------------------------

    async def ping(self, timeout=None):
        return await self.call("ping", timeout=timeout)

    async def plugins(self, timeout=None):
        return await self.call("plugins.list", timeout=timeout)

    async def stats(self, timeout=None):
        return await self.call("stats", timeout=timeout)

    async def metrics(self, format=None, timeout=None):
        return await self.call("metrics", *([] if format is None else [format]), timeout=timeout)

    async def submit(self, plugin, args=None, **options):
        return (await self.call("job.submit", plugin, args or {}, job_options(**options)))["id"]

    async def run(self, plugin, args=None, wait=None, fields=None, **options):
        return await self.call("job.run", plugin, args or {}, job_options(**options),
                               _sync._ms(wait), *_sync._fields(fields))

    async def run_many(self, jobs, wait=None, return_exceptions=False, fields=None):
        """Client.run_many(): every job.run written before the first answer is read;
        the records in the order of @jobs."""
        sent = [self.send("job.run", plugin, args, opts, _sync._ms(wait), *_sync._fields(fields))
                for plugin, args, opts in map(_sync._job_request, jobs)]
        # no per-call timeout here: the client's default bounds each answer
        return await asyncio.gather(*(self._answer(m, f, None) for m, f in sent),
                                    return_exceptions=return_exceptions)

    async def status(self, job_id):
        return await self.call("job.status", job_id)

    async def wait(self, job_id, timeout=None, fields=None):
        """Wait until the job ends or @timeout seconds pass; the job record (@fields as
        Client.run()'s). The call itself waits @timeout and a second more for the answer."""
        return await self.call("job.wait", job_id, _sync._ms(timeout), *_sync._fields(fields),
                               timeout=None if timeout is None else timeout + 1)

    async def result(self, job_id):
        return await self.call("job.result", job_id)

    async def cancel(self, job_id):
        return await self.call("job.cancel", job_id)

    async def logs(self, job_id):
        """job.logs: {id, lines, dropped, bytes}; follow_logs() follows them."""
        return await self.call("job.logs", job_id)

    async def follow_logs(self, job_id, poll=0.25):
        """Client.follow_logs() as an async generator: each line (with "missed") as it
        is logged, until the job is final."""
        handed, final = 0, False
        while True:
            new, missed, handed = lines_past(await self.call("job.logs", job_id), handed)
            for line in new:
                line["missed"], missed = missed, 0
                yield line
            if final:
                return
            record = await self.call("job.wait", job_id, _sync._ms(poll))
            final = record.get("state") in FINAL_STATES

    async def list(self, state=None, plugin=None, page_size=None):
        """Every job record you may see, newest first, page by page (async generator)."""
        flt = {"cursor": None}
        for k, v in (("state", state), ("plugin", plugin), ("limit", page_size)):
            if v is not None:
                flt[k] = v
        while True:
            page = await self.call("job.list", flt)
            for rec in page["jobs"]:
                yield rec
            if not page.get("next_cursor"):
                return
            flt["cursor"] = page["next_cursor"]

    async def retry(self, *job_ids, all=False):
        return (await self.call("job.retry", _sync._ids_or_all(job_ids, all)))["retried"]

    async def discard(self, *job_ids, all=False):
        return (await self.call("job.discard", _sync._ids_or_all(job_ids, all)))["discarded"]

    async def pause(self, kind, name):
        return await self.call("pause", _sync._kind(kind), name)

    async def resume(self, kind, name):
        return await self.call("resume", _sync._kind(kind), name)

    async def schedule_list(self):
        return await self.call("schedule.list")

    async def schedule_remove(self, name, owner=None):
        return await self.call("schedule.remove", *_sync._name_owner(name, owner))
