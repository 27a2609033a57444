"""kazoo's Lock (kazoo==2.11.0, clients/python/requirements.txt) against a ZooKeeper
ensemble as a locksim client.

    locksim run --real --system zookeeper --scenario gc-pause \\
        --client 'target/clients-venv/bin/python clients/python/kazoo_lock.py'

The lock logic is kazoo's, untouched: one `KazooClient` a process over every server of
the configuration's `lock_servers`, with the world's session timeout
(`session_timeout_ms`) as its `timeout`, and per acquisition a `client.Lock(path)`,
`acquire(blocking=True, timeout=...)` (the world's wait) and `release()`. The lock's
path is `/` and the world's key (`/lock:stock`); its contenders are kazoo's ephemeral
sequential nodes under it.

kazoo gives its caller no validity and no fencing token: the owner value reported is
the lock's own node (`<uuid>__lock__<sequence>`). Its documentation asks the caller to
watch the connection's state and treat `LOST` as the lock lost (and `SUSPENDED` as
perhaps lost); the workload has no step where it would look, so this adapter, like a
caller that does not, never does. An acquisition that ends in kazoo's `LockTimeout`
(its node deleted behind it) is certainly not taken; any other error is unknown.
"""

import os
import sys
from importlib.metadata import version

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import locksim_client  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402
from kazoo.exceptions import LockTimeout  # noqa: E402


class KazooLock:
    name = "kazoo %s Lock" % version("kazoo")

    def __init__(self, config):
        if config.get("session_timeout_ms") is None:
            raise ValueError(
                "kazoo's Lock needs a ZooKeeper world (--system zookeeper): this one "
                "has no session timeout"
            )
        hosts = ",".join(config["servers"][s] for s in config["lock_servers"])
        self.zk = KazooClient(hosts=hosts, timeout=config["session_timeout_ms"] / 1000.0)
        self.zk.start(timeout=max(5.0, config["connect_timeout_ms"] / 1000.0))
        self.path = "/" + config["key"]
        self.wait_s = config["wait_ms"] / 1000.0

    def acquire(self):
        lock = self.zk.Lock(self.path)
        try:
            if not lock.acquire(blocking=True, timeout=self.wait_s):
                return None
        except LockTimeout:
            return None
        return locksim_client.Held(lock.node, handle=lock)

    def release(self, held):
        return bool(held.handle.release())


if __name__ == "__main__":
    locksim_client.main(KazooLock)
