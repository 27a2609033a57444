"""locksim's client protocol (version 1) and workload loop, for a lock in Python.

An adapter is a small class with the lock logic only; this module does the rest:
the hello, the configuration, the workload (acquire, read the stock, work, write,
release, think, until the run's end) and every line to and from the parent. See
docs/clients.md for the protocol; redis_py_lock.py is an adapter.

    class MyLock:
        name = "my-lock 1.0"            # the client's name in its hello

        def __init__(self, config):      # the configuration (a dict)
            ...

        def acquire(self):               # a Held, or None: certainly not acquired;
            ...                          # an exception: unknown whether it was

        def release(self, held):         # True: released; False: it was not ours
            ...                          # (any more); an exception: unknown

        def validity_ms(self, held):     # optional: ms of validity the holder
            ...                          # believes it has left (None: unknown)

A lock that renews itself (a watchdog thread) reports each renewal that succeeded with
`self.locksim.renewed(owner, valid_ms)`: `main` sets `locksim`, the Protocol, on the
adapter once it is made.

    if __name__ == "__main__":
        locksim_client.main(MyLock)

Standard library only; Python 3.8 or newer.
"""

import json
import os
import queue
import random
import sys
import threading
import time

PROTOCOL = 1


class Held:
    """What an adapter's acquire returns: the owner value it locked with, and
    optionally the fencing token and the validity (ms) the lock grants."""

    def __init__(self, owner, token=None, valid_ms=None, handle=None):
        self.owner = owner
        self.token = token
        self.valid_ms = valid_ms
        # Anything the adapter needs to release (the library's lock object).
        self.handle = handle


class Protocol:
    """One client process's side of the protocol: its hello, its configuration, its
    lines to the parent (stamped on the run's clock) and the parent's lines."""

    def __init__(self, name, stdin=None, stdout=None):
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._write_lock = threading.Lock()
        self._storage = queue.Queue()
        self._resume = queue.Queue()
        self._armed = threading.Event()
        self._slow_ms = 0
        self._slow_lock = threading.Lock()
        self._next_id = 0
        self.send("V %d %s" % (PROTOCOL, name))
        first = self._in.readline()
        if not first:
            sys.exit(0)
        self.config = json.loads(first)
        if self.config.get("protocol") != PROTOCOL:
            raise SystemExit(
                "the parent speaks protocol %r, this harness %d"
                % (self.config.get("protocol"), PROTOCOL)
            )
        self._epoch_ns = self.config["epoch_ns"]
        reader = threading.Thread(target=self._read_parent, daemon=True)
        reader.start()

    # -- the run's clock -------------------------------------------------------

    def now_us(self):
        """µs since the run's epoch on CLOCK_MONOTONIC (time.monotonic_ns on Linux)."""
        return max(0, (time.monotonic_ns() - self._epoch_ns) // 1000)

    def seconds_left(self):
        """Seconds until the run's end (its duration_ms), negative past it."""
        return (self.config["duration_ms"] * 1000 - self.now_us()) / 1e6

    # -- lines -----------------------------------------------------------------

    def send(self, line):
        with self._write_lock:
            try:
                self._out.write(line + "\n")
                self._out.flush()
            except (BrokenPipeError, ValueError):
                # The parent is gone: so is the run.
                os._exit(0)

    def _read_parent(self):
        for line in self._in:
            line = line.rstrip("\n")
            tag, _, rest = line.partition(" ")
            if tag == "S":
                self._storage.put(rest)
            elif tag == "P":
                self._resume.put(True)
            elif tag == "A":
                self._armed.set()
            elif tag == "W":
                with self._slow_lock:
                    self._slow_ms += int(rest or 0)
        # The parent closed our stdin: the run is over.
        os._exit(0)

    def op(self, op_id, phase, f, **fields):
        """Reports one operation event: `O <at_us> <id> <phase> <f> [field=value]`."""
        words = ["O", str(self.now_us()), str(op_id), phase, f]
        detail = fields.pop("detail", None)
        for name, value in fields.items():
            if value is not None:
                words.append("%s=%s" % (name, value))
        if detail is not None:
            words.append("detail=" + str(detail).replace("\n", " "))
        self.send(" ".join(words))

    def invoke(self, f, **fields):
        """Reports an operation's start; returns its id."""
        with self._write_lock:
            self._next_id += 1
            op_id = self._next_id
        self.op(op_id, "invoke", f, **fields)
        return op_id

    def renewed(self, owner, valid_ms, key=None):
        """Reports a renewal that succeeded: from now on the holder of `owner` believes
        it has `valid_ms` of validity (any thread may call it)."""
        with self._write_lock:
            self._next_id += 1
            op_id = self._next_id
        self.op(op_id, "ok", "renew", key=key, owner=owner, valid_ms=int(valid_ms))

    def storage(self, request):
        """A storage request (`S <request>`), answered by the parent."""
        self.send("S " + request)
        return self._storage.get()

    def pause_point(self):
        """Just before a write: if the parent armed a pause, it stops this process now."""
        if self._armed.is_set():
            self._armed.clear()
            self.send("P")
            self._resume.get()

    def take_slow_ms(self):
        with self._slow_lock:
            ms, self._slow_ms = self._slow_ms, 0
        return ms


def _describe(e):
    return "%s: %s" % (type(e).__name__, e)


class Workload:
    """The workload loop over an adapter, as the built-in client runs it."""

    def __init__(self, proto, lock):
        self.p = proto
        self.lock = lock
        c = proto.config
        self.name = c["name"]
        self.key = c["key"]
        seed = (c["seed"] << 20) ^ (c["index"] << 8) ^ c["incarnation"]
        self.rng = random.Random(seed)

    def run(self):
        while self.p.seconds_left() > 0:
            held = self.acquire()
            if held is not None:
                self.critical_section(held)
                self.release(held)
            think = self.rng.randint(0, self.p.config["think_ms_max"])
            time.sleep(think / 1000.0)
        self.p.send("X")

    def acquire(self):
        i = self.p.invoke("acquire", key=self.key)
        try:
            held = self.lock.acquire()
        except Exception as e:  # noqa: BLE001 - any error: unknown whether it took
            self.p.op(i, "info", "acquire", key=self.key, detail=_describe(e))
            return None
        if held is None:
            self.p.op(i, "fail", "acquire", key=self.key, detail="not acquired")
            return None
        self.p.op(
            i,
            "ok",
            "acquire",
            key=self.key,
            owner=held.owner,
            token=held.token,
            valid_ms=held.valid_ms,
        )
        return held

    def release(self, held):
        i = self.p.invoke("release", key=self.key, owner=held.owner)
        try:
            released = self.lock.release(held)
        except Exception as e:  # noqa: BLE001
            self.p.op(i, "info", "release", key=self.key, owner=held.owner, detail=_describe(e))
            return
        if released:
            self.p.op(i, "ok", "release", key=self.key, owner=held.owner, detail="released")
        else:
            self.p.op(i, "fail", "release", key=self.key, owner=held.owner, detail="not owned")

    def critical_section(self, held):
        """Read the stock, work, write stock - 1, through the parent's storage."""
        tok = "-" if held.token is None else str(held.token)
        i = self.p.invoke("read", token=held.token)
        reply = self.p.storage("R %s %s" % (self.name, tok))
        if reply == "REJECTED":
            self.p.op(i, "fail", "read", detail="rejected by fencing")
            return
        try:
            read = int(reply)
        except ValueError:
            self.p.op(i, "info", "read", detail="bad storage reply %r" % reply)
            return
        self.p.op(i, "ok", "read", value=read)
        work_ms = self.p.config["work_ms"] + self.p.take_slow_ms()
        time.sleep(work_ms / 1000.0)
        i = self.p.invoke("write", value=read - 1, token=held.token)
        margin = self.p.config.get("check_validity_ms")
        validity = getattr(self.lock, "validity_ms", None)
        if margin is not None and validity is not None:
            left = validity(held)
            if left is not None and left < margin:
                self.p.op(
                    i,
                    "fail",
                    "write",
                    detail="abandoned: %d ms of validity left, %d ms required" % (left, margin),
                )
                return
        self.p.pause_point()
        reply = self.p.storage("W %s %d %d %s" % (self.name, read, read - 1, tok))
        if reply == "OK":
            self.p.op(i, "ok", "write", value=read - 1)
        else:
            self.p.op(i, "fail", "write", detail="rejected by fencing")


def main(adapter_class):
    """Runs one client process: the hello with the adapter's name, its configuration,
    then the workload until the run's end."""
    proto = Protocol(getattr(adapter_class, "name", adapter_class.__name__))
    try:
        lock = adapter_class(proto.config)
    except Exception as e:  # noqa: BLE001
        print("locksim client: the adapter did not start: %s" % _describe(e), file=sys.stderr)
        sys.exit(2)
    lock.locksim = proto
    Workload(proto, lock).run()
