"""The Chrome export's output file: the events' bytes written by a thread of its own
(Sink), each chunk after a comma but the first (write_events), and the one error line of
a file that cannot be written."""

import queue
import shutil
import threading

import numpy as np

from perfweave.errors import PerfweaveError


def cannot_write(path, e):
    return PerfweaveError(f"{path}: cannot write ({e.strerror or e})")


class Sink:
    """The output file, written by a thread of its own: the bytes of one chunk go to
    the file (the kernel, the disk) while the next chunk is read and formatted. Holds
    at most QUEUED blocks; `buffer` hands out the buffers format_rows fills for it in turn
    (QUEUED + 2: one being filled, one being written, the queued ones), kept from one
    block to the next so their pages stay mapped, none reused while in use. A failed
    write is raised by the next call."""

    QUEUED = 2

    def __init__(self, f):
        self.f, self.error = f, None
        self.q = queue.Queue(self.QUEUED)
        self.buffers = [np.zeros(0, np.uint8) for _ in range(self.QUEUED + 2)]
        self.turn = 0
        self.thread = threading.Thread(target=self._run, name="chrome-writer", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            data = self.q.get()
            try:
                if data is None:
                    return
                if self.error is None:
                    self.f.write(data)
            except Exception as e:  # kept for the main thread, which waits on q
                self.error = e
            finally:
                self.q.task_done()

    def _check(self):
        if self.error is not None:
            raise self.error

    def buffer(self, n):
        """n bytes or more for a block that will be written by write() before the next
        call of buffer() (or not at all)."""
        k = self.turn = (self.turn + 1) % len(self.buffers)
        if len(self.buffers[k]) < n:
            self.buffers[k] = np.empty(max(n, 2 * len(self.buffers[k])), np.uint8)
        return self.buffers[k]

    def write(self, data):
        self._check()
        self.q.put(data)

    def copy(self, src):
        """Append file object src (after what is queued)."""
        self.q.join()
        self._check()
        shutil.copyfileobj(src, self.f, 1 << 20)

    def close(self):
        """Wait for the queued writes; raise the first that failed."""
        self.q.put(None)
        self.thread.join()
        self._check()


def write_events(f, data, first):
    """Write a chunk of events (each starting with ',' unless it is the very first);
    data: bytes or a byte matrix (written as it is, without a copy)."""
    data = memoryview(data).cast("B")
    if not len(data):
        return first
    if first:
        data = data[1:]
    f.write(data)
    return False
