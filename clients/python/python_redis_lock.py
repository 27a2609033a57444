"""python-redis-lock's Lock (python-redis-lock==4.0.1, clients/python/requirements.txt)
with its renewal thread (`auto_renewal=True`) as a locksim client.

    locksim run --real --system redis --scenario gc-pause --param lease-ms=1000 \\
        --client 'target/clients-venv/bin/python clients/python/python_redis_lock.py'

The lock logic is the library's, untouched: `redis_lock.Lock(redis, name,
expire=..., auto_renewal=True)`, `acquire(blocking=True, timeout=...)` and `release()`.
The library counts `expire` and `timeout` in whole seconds (`int(expire)`, `SET ... EX`),
so the world's lease must be whole seconds (`--param lease-ms=1000`): any other lease
is refused, since the key would not live as long as the world judges it does. The wait
is the world's, rounded up to a whole second (the library's `timeout`). Its waiters
block in `BLPOP` on a signal list for up to that long, so the connection's reply
timeout is the world's plus the wait (a shorter one would cut every `BLPOP` short).

The library's key is `lock:<name>`: the world's key must start with `lock:`, and the
name is the rest, so that the servers hold the key the world names.

The library gives its caller no validity and no fencing token. The validity reported
is the lease counted from the moment the `SET` that took the lock was sent; each
extension of the renewal thread (every `expire * 2/3` seconds) that succeeded is
reported as a renewal, with the lease counted from the moment it was sent. Both are
observed by wrapping the client's `set` and the Lock's `extend` without changing them.
"""

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import locksim_client  # noqa: E402
import redis  # noqa: E402
import redis_lock  # noqa: E402

PREFIX = "lock:"


class ObservedRedis(redis.StrictRedis):
    """The client, noting when each `SET NX` (a try to take the lock) is sent."""

    last_set = None

    def set(self, *args, **kwargs):
        if kwargs.get("nx"):
            self.last_set = time.monotonic()
        return super().set(*args, **kwargs)


class ObservedLock(redis_lock.Lock):
    """The library's Lock, reporting each extension that succeeded (its renewal
    thread's) to the parent; nothing else changes."""

    locksim = None
    valid_until = None

    def extend(self, expire=None):
        sent = time.monotonic()
        super().extend(expire)
        self.valid_until = sent + self._expire
        if self.locksim is not None:
            left_ms = max(0, int((self.valid_until - time.monotonic()) * 1000))
            self.locksim.renewed(self.id, left_ms)


class PythonRedisLock:
    name = "python-redis-lock %s Lock auto_renewal" % redis_lock.__version__

    def __init__(self, config):
        if config["lease_ms"] < 1000 or config["lease_ms"] % 1000:
            raise ValueError(
                "python-redis-lock's expire is whole seconds (SET EX); the world's "
                "lease is %d ms: run it with --param lease-ms=1000 (or 2000, ...)"
                % config["lease_ms"]
            )
        if not config["key"].startswith(PREFIX) or len(config["key"]) == len(PREFIX):
            raise ValueError(
                "python-redis-lock's keys are `lock:<name>`; the world's key %r is not"
                % config["key"]
            )
        self.expire_s = config["lease_ms"] // 1000
        self.wait_s = max(1, math.ceil(config["wait_ms"] / 1000))
        server = config["lock_servers"][0]
        host, port = config["servers"][server].rsplit(":", 1)
        self.redis = ObservedRedis(
            host=host,
            port=int(port),
            socket_timeout=config["response_timeout_ms"] / 1000.0 + self.wait_s,
            socket_connect_timeout=config["connect_timeout_ms"] / 1000.0,
        )
        self.lock_name = config["key"][len(PREFIX) :]

    def acquire(self):
        lock = ObservedLock(self.redis, self.lock_name, expire=self.expire_s, auto_renewal=True)
        lock.locksim = self.locksim
        if not lock.acquire(blocking=True, timeout=self.wait_s):
            return None
        lock.valid_until = self.redis.last_set + self.expire_s
        return locksim_client.Held(lock.id, valid_ms=self.validity_ms_of(lock), handle=lock)

    def release(self, held):
        try:
            held.handle.release()
        except redis_lock.NotAcquired:
            return False
        return True

    def validity_ms(self, held):
        return self.validity_ms_of(held.handle)

    @staticmethod
    def validity_ms_of(lock):
        return max(0, int((lock.valid_until - time.monotonic()) * 1000))


if __name__ == "__main__":
    locksim_client.main(PythonRedisLock)
