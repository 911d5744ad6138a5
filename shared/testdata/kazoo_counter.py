"""kazoo_counter adds to a counter with kazoo's Counter, as a Python process
sharing it with corral's shared.Counter would:

    python3 kazoo_counter.py CONNECT PATH ADDS DELTA [curator]

It adds DELTA to the counter at PATH, ADDS times (with support_curator when
the fifth argument is "curator"), and prints the value it reads at the end.
"""
import sys

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

connect, path, adds, delta = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
curator = len(sys.argv) > 5 and sys.argv[5] == "curator"
# Unbounded tries: under contention kazoo's default policy gives up.
retry = KazooRetry(max_tries=-1, delay=0.001, max_delay=0.05)
zk = KazooClient(hosts=connect, timeout=10.0, command_retry=retry)
zk.start(timeout=30)
try:
    counter = zk.Counter(path, support_curator=curator)
    for _ in range(adds):
        counter += delta
    print(counter.value)
finally:
    zk.stop()
    zk.close()
