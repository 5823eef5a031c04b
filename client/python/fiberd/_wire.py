# SPDX-License-Identifier: MIT
"""fiberd._wire — what the synchronous client (fiberd.client) and the asyncio one
(fiberd.aio) share: packing a request with the files it passes, the queue of bytes and
descriptors not yet written, and reading an answer off the wire.

Files (PROTOCOL.md, "Passing files"): an Fd in a request's params is packed as an *fd
argument*, msgpack ext type 1 holding the 4-byte big-endian index of that file among the
request's fds, and the fds go as SCM_RIGHTS ancillary data on the first byte of the
request. The Outbox keeps a duplicate of each fd (os.dup, close-on-exec) from the moment
the request is queued until its first byte is written, so the caller may close its own
file at once; the duplicates are closed once sent, or when the queue is dropped.

Not thread-safe: each client owns one Outbox.
"""

import array
import collections
import os
import socket as _socket
import struct

import msgpack

REQUEST, RESPONSE, NOTIFICATION = 0, 1, 2
FD_EXT_TYPE = 1  # msgpack ext type of an fd argument
MAX_FDS = 8  # fds one request may pass
_WRITE_CHUNK = 256 * 1024  # bytes handed to one send(); bounds the copy of the queue head


class Fd:
    """A file to pass with a request, in place of a path: Fd(3), Fd(open(path, "rb")),
    or anything with fileno(). The plugin reads it with host->arg_fd() (the bundled
    sha256 takes one under "path"); fiberd never opens it with its own rights. The
    descriptor is duplicated when the request is queued: close yours whenever you like."""

    __slots__ = ("fd",)

    def __init__(self, file):
        self.fd = file if isinstance(file, int) else file.fileno()
        if self.fd < 0:
            raise ValueError("Fd(%r): not an open descriptor" % (file,))

    def __repr__(self):
        return "Fd(%d)" % self.fd


def pack_request(msgid, method, params):
    """The bytes of [0, msgid, method, params] and the fds its Fd arguments stand for, in
    index order (the same Fd object twice is one fd). Raises ValueError past MAX_FDS,
    TypeError for a value msgpack cannot carry."""
    fds = []
    index = {}

    def default(obj):
        if isinstance(obj, Fd):
            i = index.get(id(obj))
            if i is None:
                if len(fds) >= MAX_FDS:
                    raise ValueError("a request passes at most %d files" % MAX_FDS)
                i = index[id(obj)] = len(fds)
                fds.append(obj.fd)
            return msgpack.ExtType(FD_EXT_TYPE, struct.pack(">I", i))
        raise TypeError("cannot send %r to fiberd (msgpack carries None, bool, int, float, "
                        "str, bytes, list, dict and fiberd.Fd)" % (obj,))

    data = msgpack.packb([REQUEST, msgid, method, list(params)], use_bin_type=True,
                         default=default)
    return data, fds


class Outbox:
    """Bytes queued for the socket, with the fds to attach to given offsets."""

    def __init__(self):
        self.buf = bytearray()
        self._marks = collections.deque()  # [offset in buf, [duplicated fds]], in order

    def __len__(self):
        return len(self.buf)

    def add(self, data, fds=()):
        """Queue @data; @fds (duplicated now) go with its first byte."""
        if fds:
            dups = []
            try:
                for fd in fds:
                    dups.append(os.dup(fd))
            except OSError:
                for d in dups:
                    os.close(d)
                raise
            self._marks.append([len(self.buf), dups])
        self.buf += data

    def write_some(self, sock):
        """One send()/sendmsg() of the head of the queue; returns the bytes written.
        Raises what the socket raises (BlockingIOError: nothing taken)."""
        marks = self._marks
        if marks and marks[0][0] == 0:
            end = marks[1][0] if len(marks) > 1 else len(self.buf)
            chunk = bytes(self.buf[:min(end, _WRITE_CHUNK)])
            n = sock.sendmsg([chunk], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                        array.array("i", marks[0][1]))])
            for fd in marks.popleft()[1]:  # they went with the first byte
                os.close(fd)
        else:
            end = marks[0][0] if marks else len(self.buf)
            n = sock.send(bytes(self.buf[:min(end, _WRITE_CHUNK)]))
        del self.buf[:n]
        for m in marks:
            m[0] -= n
        return n

    def clear(self):
        """Drop what is queued, closing the duplicated fds."""
        self.buf.clear()
        while self._marks:
            for fd in self._marks.popleft()[1]:
                os.close(fd)


def new_unpacker(max_message):
    return msgpack.Unpacker(raw=False, unicode_errors="surrogateescape",
                            max_buffer_size=max_message)


def lines_past(answer, handed):
    """The lines of a job.logs @answer not yet handed over, given @handed, the count of
    lines ever kept that were (fiberd numbers no line, but counts those it let go:
    "dropped"). Returns (new lines, lines let go unseen, the new count handed)."""
    dropped = answer.get("dropped", 0)
    lines = answer.get("lines", [])
    missed = max(0, dropped - handed)
    start = max(0, handed - dropped)
    return lines[start:], missed, max(handed, dropped + len(lines))


FINAL_STATES = frozenset(("done", "failed", "cancelled", "dead"))
