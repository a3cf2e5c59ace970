"""A pipe as a trio stream that reads and writes first and waits only when the pipe is not ready.

trio.lowlevel.FdStream yields to the scheduler before every read and write, then waits for readiness when
a read finds nothing: two trips through the scheduler per message each way. On the forwarding path (a
client's pipe and a backend's, both ways) those trips were a third of the gateway's CPU per call. This
wrapper borrows the FdStream's file descriptor (already non-blocking) for the fast path; the FdStream
still owns the descriptor and closes it, which wakes a waiting reader here too (trio notifies by fd).
Cancellation is still honoured at every call (checkpoint_if_cancelled). A reader that never has to wait
(a peer that writes faster than we read, or an endless line from /dev/zero being skipped) yields every
READS_PER_YIELD reads, so signals, timeouts and other tasks still get their turn. A read of a pipe that
got fewer bytes than it asked for took all the pipe held: the next read waits for readiness first instead
of finding the pipe empty: a failed read and its exception saved per message (docs/performance.md, issue
#27).

`send_whole_nowait` is the one synchronous write: it writes a small frame to a pipe whole or not at all. A
write of at most PIPE_BUF bytes to a pipe is atomic (POSIX), so when the pipe is full nothing of it is
written and the caller sends it the usual way; a socket or a file (stdout redirected) gives no such promise,
so there it never writes.
"""

from __future__ import annotations

import errno
import os
import select
import stat
from typing import Final

import trio

READ_SIZE: Final = 65536
READS_PER_YIELD: Final = 16  # reads in a row that found data before a trip through the scheduler


class PipeStream(trio.abc.HalfCloseableStream):
    def __init__(self, pipe: trio.lowlevel.FdStream) -> None:
        self._pipe = pipe
        # The FdStream's holder of its descriptor: `.fd` is what `pipe.fileno()` returns (-1 once closed),
        # read without a method call on every read and write. A unit test holds it to fileno().
        self._fd = pipe._fd_holder
        self._reads_without_wait = 0
        self._drained = False  # the last read of this pipe took all it held (fewer bytes than asked for)
        try:
            self._atomic = stat.S_ISFIFO(os.fstat(pipe.fileno()).st_mode)
        except OSError:
            self._atomic = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        size = max_bytes or READ_SIZE
        if self._drained and self._fd.fd >= 0:
            self._drained = False  # the last read emptied the pipe: a read now would find nothing
            self._reads_without_wait = 0
            await trio.lowlevel.wait_readable(self._fd.fd)
        else:
            self._reads_without_wait += 1
            if self._reads_without_wait >= READS_PER_YIELD:
                self._reads_without_wait = 0
                await trio.lowlevel.checkpoint()
            else:
                await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            try:
                data = os.read(self._fd.fd, size)
                self._drained = self._atomic and 0 < len(data) < size  # a pipe gives all it holds
                return data
            except BlockingIOError:
                self._reads_without_wait = 0
                await trio.lowlevel.wait_readable(self._fd.fd)
            except OSError as exc:
                raise _closed_or_broken(exc) from None

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        with memoryview(data) as view:
            sent = 0
            while sent < len(view):
                try:
                    sent += os.write(self._fd.fd, view[sent:])
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self._fd.fd)
                except OSError as exc:
                    raise _closed_or_broken(exc) from None

    def send_whole_nowait(self, data: bytes) -> bool:
        """Write `data` now, whole, without waiting; False when nothing was written (not a pipe, more than
        PIPE_BUF bytes, the pipe full or broken: a later `send_all` finds out which)."""
        if not self._atomic or len(data) > select.PIPE_BUF:
            return False
        try:
            return os.write(self._fd.fd, data) == len(data)  # atomic: all of it or an error
        except OSError:
            return False

    async def wait_send_all_might_not_block(self) -> None:
        await self._pipe.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._pipe.aclose()

    async def aclose(self) -> None:
        await self._pipe.aclose()


def _closed_or_broken(exc: OSError) -> trio.ClosedResourceError | trio.BrokenResourceError:
    if exc.errno == errno.EBADF:  # closed here (fileno() is -1 once the FdStream is closed)
        return trio.ClosedResourceError("the pipe was closed")
    broken = trio.BrokenResourceError(f"the pipe is broken: {exc.strerror or exc}")
    broken.__cause__ = exc
    return broken
