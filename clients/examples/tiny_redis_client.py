"""A whole locksim client in one file, without the harness: the protocol (version 1,
docs/clients.md) spoken by hand, over a lock written by hand in raw RESP (SET NX PX to
acquire, DEL to release: the `set-nx-px-del` recipe, unsafe under a pause).

    locksim run --real --system redis --scenario gc-pause \\
        --client 'python3 clients/examples/tiny_redis_client.py'

Standard library only.
"""

import json
import os
import random
import socket
import sys
import threading
import time

print("V 1 tiny-redis-client", flush=True)
config = json.loads(sys.stdin.readline())
epoch_ns = config["epoch_ns"]
replies = []
reply_ready = threading.Condition()


def now_us():
    return (time.monotonic_ns() - epoch_ns) // 1000


def send(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def read_parent():
    for line in sys.stdin:
        tag, _, rest = line.rstrip("\n").partition(" ")
        if tag == "S":
            with reply_ready:
                replies.append(rest)
                reply_ready.notify()
    os._exit(0)  # stdin closed: the run is over


def storage(request):
    send("S " + request)
    with reply_ready:
        reply_ready.wait_for(lambda: replies)
        return replies.pop(0)


def command(sock, *args):
    """One RESP command; its reply's first line."""
    out = "*%d\r\n" % len(args)
    for a in args:
        a = str(a)
        out += "$%d\r\n%s\r\n" % (len(a.encode()), a)
    sock.sendall(out.encode())
    return replies_from_redis.readline().decode().rstrip("\r\n")


threading.Thread(target=read_parent, daemon=True).start()
host, port = config["servers"][config["lock_servers"][0]].rsplit(":", 1)
sock = socket.create_connection((host, int(port)))
replies_from_redis = sock.makefile("rb")
name, key, lease = config["name"], config["key"], config["lease_ms"]
rng = random.Random(config["seed"] * 1000 + config["index"])
op_id = 0
while now_us() < config["duration_ms"] * 1000:
    op_id += 1
    owner = "%s-%d-%d" % (name, config["incarnation"], op_id)
    send("O %d %d invoke acquire" % (now_us(), op_id))
    if command(sock, "SET", key, owner, "NX", "PX", lease) == "+OK":
        send("O %d %d ok acquire owner=%s valid_ms=%d" % (now_us(), op_id, owner, lease))
        read = int(storage("R %s -" % name))
        time.sleep(config["work_ms"] / 1000.0)
        storage("W %s %d %d -" % (name, read, read - 1))
        op_id += 1
        send("O %d %d invoke release owner=%s" % (now_us(), op_id, owner))
        command(sock, "DEL", key)
        send("O %d %d ok release owner=%s" % (now_us(), op_id, owner))
    else:
        send("O %d %d fail acquire detail=held" % (now_us(), op_id))
    time.sleep(rng.randint(0, config["think_ms_max"]) / 1000.0)
send("X")
