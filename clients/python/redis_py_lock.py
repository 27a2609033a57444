"""redis-py's own Lock (redis==5.3.1, clients/python/requirements.txt) as a locksim
client: the original library beside the `redis-py` port, under the same faults.

    locksim run --real --system redis --scenario gc-pause \\
        --client 'target/clients-venv/bin/python clients/python/redis_py_lock.py'

The lock logic is redis-py's, untouched: `Redis.lock(name, timeout, sleep,
blocking_timeout)`, `Lock.acquire()` and `Lock.release()`. Its parameters are the
world's: the lease as `timeout`, the wait budget as `blocking_timeout`, and redis-py's
default `sleep=0.1` at the world's time scale, as the port takes them.

redis-py gives its caller no validity and no fencing token. The validity reported is
the lease counted from the moment the `SET` that took the lock was sent (what the
key's PX grants; the port's guard says the same), observed by wrapping `do_acquire`
without changing it.
"""

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import locksim_client  # noqa: E402
import redis  # noqa: E402
from redis.exceptions import LockNotOwnedError  # noqa: E402
from redis.lock import Lock  # noqa: E402


class ObservedLock(Lock):
    """redis-py's Lock, noting when each try's SET is sent (nothing else changes)."""

    last_try = None

    def do_acquire(self, token):
        self.last_try = time.monotonic()
        return super().do_acquire(token)


class RedisPyLock:
    name = "redis-py %s Lock" % redis.__version__

    def __init__(self, config):
        server = config["lock_servers"][0]
        host, port = config["servers"][server].rsplit(":", 1)
        self.redis = redis.Redis(
            host=host,
            port=int(port),
            socket_timeout=config["response_timeout_ms"] / 1000.0,
            socket_connect_timeout=config["connect_timeout_ms"] / 1000.0,
        )
        self.key = config["key"]
        self.lease_ms = config["lease_ms"]
        # Lock.__init__'s sleep=0.1 at the world's scale (never below 1 ms).
        scaled_ms = math.floor(100 * config["time_scale"])
        self.sleep = max(1, scaled_ms) / 1000.0
        self.wait_s = config["wait_ms"] / 1000.0

    def acquire(self):
        lock = self.redis.lock(
            self.key,
            timeout=self.lease_ms / 1000.0,
            sleep=self.sleep,
            blocking=True,
            blocking_timeout=self.wait_s,
            lock_class=ObservedLock,
        )
        if not lock.acquire():
            return None
        owner = lock.local.token
        if isinstance(owner, bytes):
            owner = owner.decode()
        valid_until = lock.last_try + self.lease_ms / 1000.0
        held = locksim_client.Held(owner, valid_ms=self._left_ms(valid_until), handle=lock)
        held.valid_until = valid_until
        return held

    def release(self, held):
        try:
            held.handle.release()
        except LockNotOwnedError:
            return False
        return True

    def validity_ms(self, held):
        return self._left_ms(held.valid_until)

    @staticmethod
    def _left_ms(until):
        return max(0, int((until - time.monotonic()) * 1000))


if __name__ == "__main__":
    locksim_client.main(RedisPyLock)
