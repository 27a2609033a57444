"""pottery's Redlock (pottery==3.0.1, clients/python/requirements.txt) over every lock
server of the world (the five masters of the `redlock-*` scenarios) as a locksim client.

    locksim run --real --system redis --scenario redlock-gc-pause \\
        --client 'target/clients-venv/bin/python clients/python/pottery_redlock.py'

The lock logic is pottery's, untouched: `Redlock(key, masters, auto_release_time)`,
`acquire(blocking=True, timeout=...)`, `locked()` and `release()`. Its masters are one
`redis.Redis` per server of the configuration's `lock_servers`, at the address this
client reaches it at, with the world's reply and connect timeouts; the lease is
`auto_release_time`, the wait `timeout`. pottery's own constants (its retry delay of
up to 0.2 s, its clock drift factor of 1 %) are kept as they are: there is no port of
pottery to match.

pottery's keys are `redlock:<key>`; so that the servers hold the key the world names,
the adapter's Redlock takes the world's key's prefix (`lock` of `lock:stock`) as its
own and the rest as the key.

pottery gives its caller no fencing token. Its validity is what it computes before it
returns from an acquisition (the lease, less its drift, less the time since the
attempt's first `SET`, observed by wrapping the attempt without changing it), and
later what `locked()` answers: the masters' smallest remaining TTL, less the drift and
the time the question took (the validity a `check_validity_ms` world checks).
"""

import os
import sys
import time
from importlib.metadata import version

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import locksim_client  # noqa: E402
import redis  # noqa: E402
from pottery import Redlock  # noqa: E402
from pottery.exceptions import ReleaseUnlockedLock  # noqa: E402


def observed_redlock(prefix):
    """pottery's Redlock with `prefix` for its keys, noting when each attempt starts."""

    class ObservedRedlock(Redlock):
        _KEY_PREFIX = prefix
        __slots__ = ("last_try",)

        def _Redlock__acquire_masters(self, **kwargs):
            self.last_try = time.monotonic()
            return Redlock._acquire_masters(self, **kwargs)

    return ObservedRedlock


class PotteryRedlock:
    name = "pottery %s Redlock" % version("pottery")

    def __init__(self, config):
        prefix, _, rest = config["key"].partition(":")
        if not prefix or not rest:
            raise ValueError(
                "pottery's keys are `<prefix>:<key>`; the world's key %r is not" % config["key"]
            )
        self.lock_class = observed_redlock(prefix)
        self.key = rest
        self.masters = []
        for server in config["lock_servers"]:
            host, port = config["servers"][server].rsplit(":", 1)
            self.masters.append(
                redis.Redis(
                    host=host,
                    port=int(port),
                    socket_timeout=config["response_timeout_ms"] / 1000.0,
                    socket_connect_timeout=config["connect_timeout_ms"] / 1000.0,
                )
            )
        self.lease_s = config["lease_ms"] / 1000.0
        self.wait_s = config["wait_ms"] / 1000.0

    def acquire(self):
        lock = self.lock_class(
            key=self.key, masters=self.masters, auto_release_time=self.lease_s
        )
        if not lock.acquire(blocking=True, timeout=self.wait_s):
            return None
        # What _acquire_masters required to be positive: the lease less the drift,
        # from the attempt's start.
        until = lock.last_try + self.lease_s - lock._Redlock__drift()
        valid_ms = max(0, int((until - time.monotonic()) * 1000))
        return locksim_client.Held(lock._uuid, valid_ms=valid_ms, handle=lock)

    def release(self, held):
        try:
            held.handle.release()
        except ReleaseUnlockedLock:
            return False
        return True

    def validity_ms(self, held):
        return int(held.handle.locked() * 1000)


if __name__ == "__main__":
    locksim_client.main(PotteryRedlock)
