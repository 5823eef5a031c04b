# SPDX-License-Identifier: MIT
"""fiberd.client — talk to fiberd from Python (client/python/).

One Client is one connection to fiberd's Unix socket, speaking MessagePack-RPC
(PROTOCOL.md, fiberd-protocol(7)) through Debian's python3-msgpack. The calls are
synchronous and mirror the protocol's methods::

    from fiberd import Client, FiberdError

    with Client() as c:                       # $FIBERD_SOCKET, else /run/fiberd.sock
        job = c.submit("sha256", {"path": "/etc/hostname"})
        record = c.wait(job, timeout=10)      # the job record, a dict
        print(record["state"], record.get("result"))
        for rec in c.list(state="failed"):    # every page of job.list, newest first
            print(rec["id"], rec["error"]["code"])
    try:
        c.status(999999)
    except FiberdError as e:                  # e.code == "NOT_FOUND", e.message
        ...

Pipelining: send() queues a request and returns its msgid without waiting; receive()
gives back the next answer in arrival order, which is not the order asked (fiberd answers
out of order); call() and every method wrapper wait for their own msgid and keep the
other answers for a later receive().

Errors: every failure is a FiberdError with .code, one of CODES (the protocol's error
codes: "NOT_FOUND", "INVALID_ARGUMENT", ...), and .message, a sentence for a person. A
socket that cannot be reached is "UNAVAILABLE"; a timeout here is "DEADLINE_EXCEEDED".
A job that ends failed is not an error of the call: its record says so ("state",
"error").

Times: timeouts are seconds (float; None = no limit), as in Python's socket module; job
records keep the protocol's milliseconds ("created_ms", "timeout_ms", ...), and so do the
job options (delay_ms=, backoff_ms=), but run_at= also takes a datetime with a time zone.

Job scheduling (PROTOCOL.md, "Scheduling jobs")::

    c.submit("sha256", {"path": p}, run_at=datetime(2026, 12, 1, 3, tzinfo=timezone.utc),
             max_attempts=3, backoff_ms=2000, key="nightly-2026-12-01")
    c.submit("echo", {}, after=[job], job_class="batch")   # waits for job to be done
    for rec in c.list(state="dead"):
        ...
    c.retry(41, 42)                           # or c.retry(all=True); -> [41, 42]
    c.schedule_add("nightly", "sha256", {"path": p}, cron="0 3 * * *", tz="Europe/Berlin")

Files (PROTOCOL.md, "Passing files"): put an Fd in a job's args where the plugin takes
a file, and the descriptor goes along with the request (SCM_RIGHTS); the plugin reads it
with your rights, not fiberd's::

    with open("big.iso", "rb") as f:
        rec = c.run("sha256", {"path": Fd(f)})

Job logs and metrics: logs(job) is job.logs' answer; logs(job, follow=True) (or
follow_logs()) yields each line as it is logged until the job ends, as `fiberctl logs -f`;
metrics() is the OpenMetrics text (metrics("prometheus"): Prometheus's), stats() the map.

Many jobs at once: run_many(jobs) writes every job.run request before it reads the first
answer (one connection, msgids matched), so a batch costs about one round trip instead
of one per job.

asyncio: fiberd.aio has the same methods as coroutines.

Threads: a Client is not thread-safe; use one per thread.
"""

import datetime as _datetime
import errno
import os
import select
import socket as _socket
import time

from fiberd._wire import (FINAL_STATES, NOTIFICATION, RESPONSE, Fd, Outbox, lines_past,
                          new_unpacker, pack_request)

__all__ = ["CODES", "Client", "Fd", "FiberdError", "default_socket", "job_options"]

SYSTEM_SOCKET = "/run/fiberd.sock"

# The protocol's error codes (ipc/protocol.h, PROTOCOL.md "Errors"), in its table's order.
CODES = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "FAILED_PRECONDITION",
    "OVERLOADED",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    "CANCELLED",
    "METHOD_NOT_FOUND",
    "MALFORMED_MESSAGE",
    "MESSAGE_TOO_LARGE",
    "OUT_OF_MEMORY",
    "INTERNAL",
    "INTERRUPTED",
)

_RESPONSE, _NOTIFICATION = RESPONSE, NOTIFICATION
_MAX_MESSAGE = 64 * 1024 * 1024  # bytes buffered for one answer, well above the daemon's cap
_READ_CHUNK = 65536


class FiberdError(Exception):
    """A call that failed: .code (one of CODES, or a newer daemon's) and .message."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


def default_socket():
    """The socket used when none is given: $FIBERD_SOCKET if set and not empty, else the
    system socket /run/fiberd.sock (a per-user fiberd's, $XDG_RUNTIME_DIR/fiberd.sock, is
    asked for by path)."""
    return os.environ.get("FIBERD_SOCKET") or SYSTEM_SOCKET


def _error_from_wire(err):
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        return FiberdError(err["code"], str(err.get("message", "")))
    return FiberdError("MALFORMED_MESSAGE", "fiberd sent an error that is not a {code, message} map: %r" % (err,))


class Client:
    """One connection to fiberd. Client(socket=None, timeout=None): @socket is the path
    (None: default_socket()); @timeout the seconds any one call may wait by default
    (None: no limit). Raises FiberdError("UNAVAILABLE") when nothing listens there."""

    def __init__(self, socket=None, timeout=None):
        self.path = socket or default_socket()
        self.timeout = timeout
        self._next_msgid = 1
        self._kept = []  # answers that arrived while waiting for another msgid, in order
        self._unpacker = new_unpacker(_MAX_MESSAGE)
        self._out = Outbox()
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            self._sock.connect(self.path)
        except OSError as e:
            self._sock.close()
            code = "PERMISSION_DENIED" if e.errno in (errno.EACCES, errno.EPERM) else "UNAVAILABLE"
            hint = {
                errno.ENOENT: " — is fiberd running? (set FIBERD_SOCKET or pass socket= to use another socket)",
                errno.ECONNREFUSED: " — is fiberd running? (set FIBERD_SOCKET or pass socket= to use another socket)",
                errno.EACCES: " — is your user allowed to use this socket?",
            }.get(e.errno, "")
            raise FiberdError(code, "cannot connect to %s: %s%s" % (self.path, e.strerror, hint)) from None
        self._sock.setblocking(False)
        self._closed = False

    # -- the connection -------------------------------------------------------------

    def close(self):
        """Close the connection; answers not yet received are dropped. Idempotent."""
        if not self._closed:
            self._closed = True
            self._sock.close()
            self._out.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fileno(self):
        """The socket, for select()/poll() over several sources."""
        return self._sock.fileno()

    def send(self, method, *params):
        """Queue the request method(params...) and return its msgid; nothing is written
        until a call waits or flush() is called. An Fd anywhere in @params passes that
        file with the request (at most 8)."""
        msgid = self._next_msgid
        data, fds = pack_request(msgid, method, params)
        self._out.add(data, fds)
        self._next_msgid = 1 if msgid >= 0xFFFFFFFF else msgid + 1
        return msgid

    def flush(self, timeout=None):
        """Write every queued request, waiting at most @timeout seconds."""
        deadline = self._deadline(timeout)
        while self._out:
            self._pump(deadline)

    def receive(self, timeout=None):
        """The next answer, in arrival order: (msgid, error, result), where error is None
        or a FiberdError (not raised: it is the answer to that msgid)."""
        if self._kept:
            return self._kept.pop(0)
        return self._next_answer(self._deadline(timeout))

    def call(self, method, *params, timeout=None):
        """Send method(params...) and wait for its answer: the result, or its error
        raised as FiberdError. Other answers that arrive first are kept for receive()."""
        msgid = self.send(method, *params)
        return self.wait_reply(msgid, timeout=timeout)

    def wait_reply(self, msgid, timeout=None):
        """Wait for the answer to @msgid (from send()); its result, or its error raised."""
        for i, answer in enumerate(self._kept):
            if answer[0] == msgid:
                del self._kept[i]
                return self._result(answer)
        deadline = self._deadline(timeout)
        while True:
            answer = self._next_answer(deadline)
            if answer[0] == msgid:
                return self._result(answer)
            self._kept.append(answer)

    # -- the methods ------------------------------------------------------------------

    def ping(self, timeout=None):
        """{version, protocol, pid, uptime_ms}."""
        return self.call("ping", timeout=timeout)

    def plugins(self, timeout=None):
        """{plugins: [{name, version, description, path}], refused: [{path, reason}]}."""
        return self.call("plugins.list", timeout=timeout)

    def stats(self, timeout=None):
        """The daemon's counters: {uptime_ms, jobs, plugins, groups, layout, server,
        latency, process, ...} (PROTOCOL.md, "stats")."""
        return self.call("stats", timeout=timeout)

    def metrics(self, format=None, timeout=None):
        """The counters as text: the OpenMetrics exposition (ends in "# EOF"), or with
        format="prometheus" Prometheus's text format 0.0.4. Another format raises
        INVALID_ARGUMENT."""
        return self.call("metrics", *([] if format is None else [format]), timeout=timeout)

    def logs(self, job_id, follow=False, poll=0.25):
        """The lines the job wrote with host->log (job.logs): {id, lines: [{time_ms,
        level, text}], dropped, bytes}, oldest first; fiberd keeps the newest 64 lines and
        counts the others in "dropped". Only the owner and admins may read them
        (NOT_FOUND otherwise). With follow=True: follow_logs(job_id, poll)."""
        if follow:
            return self.follow_logs(job_id, poll=poll)
        return self.call("job.logs", job_id)

    def follow_logs(self, job_id, poll=0.25):
        """Yield each line of the job's log, those kept now and then each new one as it
        is logged, until the job is final (as `fiberctl logs -f`): job.logs, then
        job.wait for at most @poll seconds, and again. Each line is fiberd's dict with
        one more key, "missed": lines let go unseen just before it (more than 64 logged
        between two looks). The generator's return value (StopIteration.value) is the
        job's final record."""
        handed, final, record = 0, False, None
        while True:
            new, missed, handed = lines_past(self.call("job.logs", job_id), handed)
            for line in new:
                line["missed"], missed = missed, 0
                yield line
            if final:
                return record
            record = self.call("job.wait", job_id, _ms(poll))
            final = record.get("state") in FINAL_STATES

    def submit(self, plugin, args=None, **options):
        """Queue a job; returns its id. @options are job.submit's, as job_options() takes
        them (priority=, timeout_ms=, job_class=, delay_ms=, run_at=, max_attempts=,
        backoff_ms=, backoff_max_ms=, after=, key=); a plugin that refuses @args raises
        INVALID_ARGUMENT. With key=, a repeat answers the first job's id."""
        result = self.call("job.submit", plugin, args or {}, job_options(**options))
        return result["id"]

    def run(self, plugin, args=None, wait=None, fields=None, **options):
        """Submit and wait in one request: the job record, final unless @wait seconds
        (None: until it ends) passed first. @fields: the record keys to answer (say
        ("result", "error")), id and state always; None = the whole record. @options
        as submit()'s."""
        return self.call("job.run", plugin, args or {}, job_options(**options), _ms(wait),
                         *_fields(fields))

    def run_many(self, jobs, wait=None, return_exceptions=False, window=None, fields=None):
        """Run many jobs and wait for them, pipelined: every job.run request is written
        before the first answer is read (the answers come in any order and are matched by
        msgid), so the batch costs about one round trip, not one per job. @jobs: an
        iterable of (plugin, args) or (plugin, args, options) with options a dict of
        submit()'s keywords, or dicts {"plugin", "args", **options}. @wait and @fields
        as run()'s; @window, when set, keeps at most that many requests in flight.
        Returns the job records in the order of @jobs. A request fiberd refuses
        (INVALID_ARGUMENT, NOT_FOUND, ...) raises its FiberdError once every answer is in,
        or with return_exceptions=True stands in its place in the list."""
        reqs = [_job_request(j) for j in jobs]
        out = [None] * len(reqs)
        slot = {}  # msgid -> index in reqs
        left = window if window else len(reqs)
        nxt = 0
        first_error = None
        while nxt < len(reqs) or slot:
            while nxt < len(reqs) and left > 0:
                plugin, args, opts = reqs[nxt]
                slot[self.send("job.run", plugin, args, opts, _ms(wait), *_fields(fields))] = nxt
                nxt += 1
                left -= 1
            msgid, err, result = self._next_answer(self._deadline(None))  # the client's timeout, per answer
            i = slot.pop(msgid, None)
            if i is None:
                self._kept.append((msgid, err, result))
                continue
            left += 1
            if err is not None:
                first_error = first_error or err
                out[i] = err
            else:
                out[i] = result
        if first_error is not None and not return_exceptions:
            raise first_error
        return out

    def status(self, job_id):
        """The job record, as it is now."""
        return self.call("job.status", job_id)

    def wait(self, job_id, timeout=None, fields=None):
        """Wait until the job ends or @timeout seconds pass (None: no limit); the job
        record, whose "state" says which; @fields as run()'s."""
        return self.call("job.wait", job_id, _ms(timeout), *_fields(fields))

    def result(self, job_id):
        """A finished job's result value (FAILED_PRECONDITION while it runs)."""
        return self.call("job.result", job_id)

    def cancel(self, job_id):
        """Cancel the job; the record (its state "cancelled", or the final one it had)."""
        return self.call("job.cancel", job_id)

    def list(self, state=None, plugin=None, page_size=None):
        """Every job record you may see, newest first, fetched page by page as the
        iteration goes (job.list with a cursor). @state, @plugin filter; @page_size
        bounds each page (None: the daemon's)."""
        flt = {"cursor": None}
        if state is not None:
            flt["state"] = state
        if plugin is not None:
            flt["plugin"] = plugin
        if page_size is not None:
            flt["limit"] = page_size
        while True:
            page = self.call("job.list", flt)
            if not isinstance(page, dict) or "jobs" not in page:
                raise FiberdError("MALFORMED_MESSAGE", "fiberd answered job.list without pages; is it older than this client?")
            yield from page["jobs"]
            if not page.get("next_cursor"):
                return
            flt["cursor"] = page["next_cursor"]

    # -- job scheduling (PROTOCOL.md, "Scheduling jobs") --------------------------------

    def retry(self, *job_ids, all=False):
        """Queue dead, failed or cancelled jobs again (job.retry): the ids given, or with
        all=True every dead job you may see. All or none: an id unknown raises
        NOT_FOUND, one not final FAILED_PRECONDITION. Returns the ids retried."""
        return self.call("job.retry", _ids_or_all(job_ids, all))["retried"]

    def discard(self, *job_ids, all=False):
        """Drop final jobs' records now (job.discard): the ids given, or with all=True
        every dead job you may see. Returns the ids discarded."""
        return self.call("job.discard", _ids_or_all(job_ids, all))["discarded"]

    def pause(self, kind, name):
        """Hold the queued jobs of a class or plugin (admin): @kind "class" or "plugin".
        Returns {kind, name, paused, queued}."""
        return self.call("pause", _kind(kind), name)

    def resume(self, kind, name):
        """Let a paused class's or plugin's queued jobs run (admin); as pause()."""
        return self.call("resume", _kind(kind), name)

    def schedule_add(self, name, plugin, args=None, cron=None, tz=None, every_ms=None,
                     missed=None, **options):
        """Submit @plugin with @args as you at each tick (schedule.add): of the cron
        expression @cron (5 fields, or @daily...) in time zone @tz (None: UTC), or every
        @every_ms milliseconds (at least 1000). @missed: "skip" (None: the daemon's
        default) or "run_once", what a tick missed while fiberd was down does. @options as
        submit()'s (key= and run_at= make no sense for a schedule: fiberd refuses them).
        Returns the schedule, a dict."""
        if (cron is None) == (every_ms is None):
            raise ValueError("schedule_add needs one of cron= and every_ms=")
        if tz is not None and cron is None:
            raise ValueError("tz= goes with cron= (an interval has no time zone)")
        spec = {"cron": cron} if cron is not None else {"every_ms": _uint("every_ms", every_ms)}
        if tz is not None:
            spec["tz"] = tz
        if missed is not None:
            if missed not in ("skip", "run_once"):
                raise ValueError("missed= must be \"skip\" or \"run_once\", not %r" % (missed,))
            spec["missed"] = missed
        return self.call("schedule.add", name, spec, plugin, args or {}, job_options(**options))

    def schedule_list(self):
        """Your schedules (an admin's: everyone's), by name: a list of dicts."""
        return self.call("schedule.list")

    def schedule_remove(self, name, owner=None):
        """Remove the schedule @name (an admin may name another user's @owner uid);
        returns it as it was."""
        return self.call("schedule.remove", *_name_owner(name, owner))

    def schedule_pause(self, name, owner=None):
        """Pause the schedule @name: it submits nothing until resumed; returns it."""
        return self.call("schedule.pause", *_name_owner(name, owner))

    def schedule_resume(self, name, owner=None):
        """Resume the schedule @name, its next tick computed from now; returns it."""
        return self.call("schedule.resume", *_name_owner(name, owner))

    # -- I/O --------------------------------------------------------------------------

    def _deadline(self, timeout):
        if timeout is None:
            timeout = self.timeout
        return None if timeout is None else time.monotonic() + timeout

    @staticmethod
    def _result(answer):
        if answer[1] is not None:
            raise answer[1]
        return answer[2]

    def _next_answer(self, deadline):
        while True:
            for msg in self._unpacker:
                answer = self._answer(msg)
                if answer is not None:
                    return answer
            self._pump(deadline)

    def _answer(self, msg):
        if isinstance(msg, list) and len(msg) == 4 and msg[0] == _RESPONSE:
            _, msgid, err, result = msg
            return (msgid, None if err is None else _error_from_wire(err), result)
        if isinstance(msg, list) and len(msg) == 3 and msg[0] == _NOTIFICATION:
            if msg[1] == "connection.error":
                self.close()
                e = _error_from_wire(msg[2][0] if msg[2] else None)
                raise FiberdError(e.code, "fiberd closed the connection: %s" % e.message)
            return None  # a notification this client does not know
        self.close()
        raise FiberdError("MALFORMED_MESSAGE", "fiberd sent a message this client cannot read: %r" % (msg,))

    def _pump(self, deadline):
        """One wait: write what the socket takes, read what has arrived."""
        if self._closed:
            raise FiberdError("UNAVAILABLE", "the connection to %s is closed" % self.path)
        left = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
        poller = select.poll()
        poller.register(self._sock, select.POLLIN | (select.POLLOUT if self._out else 0))
        events = poller.poll(left)
        if not events:
            raise FiberdError("DEADLINE_EXCEEDED", "no answer from fiberd on %s in time" % self.path)
        revents = events[0][1]
        writable = revents & select.POLLOUT
        readable = revents & (select.POLLIN | select.POLLHUP | select.POLLERR)
        if writable:
            try:
                self._out.write_some(self._sock)
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                self._out.clear()  # what the daemon said before closing is still readable
        if readable:
            try:
                data = self._sock.recv(_READ_CHUNK)
            except BlockingIOError:
                return
            except ConnectionResetError:
                data = b""
            if not data:
                self.close()
                raise FiberdError("UNAVAILABLE", "fiberd closed the connection on %s (it does after a protocol error, or when it stops)" % self.path)
            self._unpacker.feed(data)


def _job_request(job):
    """(plugin, args, options map) of one run_many() entry."""
    if isinstance(job, dict):
        job = dict(job)
        try:
            plugin = job.pop("plugin")
        except KeyError:
            raise ValueError("a job dict needs \"plugin\": %r" % (job,)) from None
        args = job.pop("args", None)
        return plugin, args or {}, job_options(**job)
    if not isinstance(job, (tuple, list)) or not 1 <= len(job) <= 3:
        raise ValueError("a job is (plugin, args) or (plugin, args, options), not %r" % (job,))
    plugin, args, opts = (tuple(job) + (None, None))[:3]
    return plugin, args or {}, job_options(**(opts or {}))


def _ms(seconds):
    """Seconds (None: no limit) as the protocol's timeout_ms (nil: no limit)."""
    return None if seconds is None else max(0, int(seconds * 1000))


def _fields(fields):
    """job.run's and job.wait's last param: nothing for the whole record (None), else
    the key names as a list (a str alone is one key, not its letters)."""
    if fields is None:
        return ()
    if isinstance(fields, str):
        fields = (fields,)
    return (list(fields),)


def _uint(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s= must be a non-negative int (milliseconds, a count), not %r" % (name, value))
    return value


def _epoch_ms(value):
    """run_at=: ms since the epoch (an int), or a datetime with a time zone."""
    if isinstance(value, _datetime.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("run_at=%s has no time zone: which one was meant cannot be known; "
                             "give tzinfo (datetime.timezone.utc, or an offset)" % value.isoformat())
        return int(value.timestamp() * 1000)
    return _uint("run_at", value)


def job_options(priority=None, timeout_ms=None, job_class=None, delay_ms=None, run_at=None,
                max_attempts=None, backoff_ms=None, backoff_max_ms=None, after=None, key=None,
                **more):
    """job.submit's options map (PROTOCOL.md, "job.submit") from keyword arguments: only
    those given (not None). job_class= is the option "class" (a Python keyword);
    run_at= is ms since the epoch or a datetime with a time zone; after= any iterable of
    job ids. Other keywords pass through as they are, for options newer than this client.
    Raises ValueError for a value of the wrong type or both delay_ms= and run_at=."""
    if delay_ms is not None and run_at is not None:
        raise ValueError("delay_ms= and run_at= both say when the job runs: give one")
    opts = {}
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise ValueError("priority= must be an int, not %r" % (priority,))
        opts["priority"] = priority
    if timeout_ms is not None:
        opts["timeout_ms"] = _uint("timeout_ms", timeout_ms)
    if job_class is not None:
        opts["class"] = job_class
    if delay_ms is not None:
        opts["delay_ms"] = _uint("delay_ms", delay_ms)
    if run_at is not None:
        opts["run_at"] = _epoch_ms(run_at)
    if max_attempts is not None:
        opts["max_attempts"] = _uint("max_attempts", max_attempts)
    if backoff_ms is not None:
        opts["backoff_ms"] = _uint("backoff_ms", backoff_ms)
    if backoff_max_ms is not None:
        opts["backoff_max_ms"] = _uint("backoff_max_ms", backoff_max_ms)
    if after is not None:
        opts["after"] = [_uint("after", i) for i in ([after] if isinstance(after, int) else after)]
    if key is not None:
        if not isinstance(key, str):
            raise ValueError("key= must be a str, not %r" % (key,))
        opts["key"] = key
    opts.update(more)
    return opts


def _ids_or_all(job_ids, all):
    if all and job_ids:
        raise ValueError("give job ids or all=True, not both")
    if all:
        return {"all": True}
    if not job_ids:
        raise ValueError("give job ids, or all=True for every dead job")
    if len(job_ids) == 1 and not isinstance(job_ids[0], int):
        job_ids = tuple(job_ids[0])  # retry([41, 42]) as well as retry(41, 42)
    return [_uint("job id", i) for i in job_ids]


def _kind(kind):
    if kind not in ("class", "plugin"):
        raise ValueError("kind must be \"class\" or \"plugin\", not %r" % (kind,))
    return kind


def _name_owner(name, owner):
    return (name,) if owner is None else (name, _uint("owner", owner))
