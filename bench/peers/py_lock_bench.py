#!/usr/bin/python3
"""The workload of bench/peer_bench.cpp on a Python peer library, for bench/peers.sh.

    py_lock_bench.py kazoo HOST:PORT BASE [--iterations N] [--handoffs N] [--contenders P]
                     [--seconds S] [--settle-us U] [--uncontended-only | --contended-only]
    py_lock_bench.py redis HOST:PORT PREFIX [...]

kazoo: kazoo.recipe.lock.Lock (a sequential ephemeral node per waiter, a watch on the
  predecessor), one KazooClient (session) per process.
redis: redis-py's Lock (SET NX PX, then a retry every `sleep` seconds, 0.1 by default, while
  blocked; release by a Lua compare-and-delete), one Redis connection pool per process.

Prints the "key value" lines of dlock-peer-bench: uncontended_us, handoff_us,
contended_per_s, contended_fewest, contended_most, and the library's version (with
--uncontended-only, the first alone; with --contended-only, the contention's: bench/peers.sh
repeats both, alternating with dlock's). Processes are forked before any of them has a client,
as dlock-peer-bench does.
"""
import argparse
import ctypes
import multiprocessing
import os
import statistics
import sys
import time


def make_lock(library, endpoint, base, name):
    """A lock of `library` on `name`, and a function that closes its client."""
    if library == "kazoo":
        from kazoo.client import KazooClient
        client = KazooClient(hosts=endpoint, timeout=15)
        client.start(timeout=15)
        return client.Lock(f"{base}/{name}"), lambda: (client.stop(), client.close())
    import redis
    host, port = endpoint.rsplit(":", 1)
    client = redis.Redis(host=host, port=int(port))
    # timeout: the key's expiry (dlock's default is 30 s too); blocking with redis-py's default
    # polling interval, as a user who writes `with r.lock(name):` gets.
    return client.lock(f"{base}{name}", timeout=30), client.close


def version(library):
    if library == "kazoo":
        import kazoo.version
        return kazoo.version.__version__
    import redis
    return redis.__version__


def uncontended(args):
    lock, close = make_lock(args.library, args.endpoint, args.base, "peer-uncontended")
    samples = []
    for i in range(-max(1, args.iterations // 10), args.iterations):  # the first tenth warms up
        start = time.monotonic_ns()
        lock.acquire()
        lock.release()
        if i >= 0:
            samples.append((time.monotonic_ns() - start) / 1000)
    close()
    return statistics.median(samples)


def take_turns(args, board, me):
    """One side of the handoff run: bench_support.cpp's take_turns, in Python."""
    lock, close = make_lock(args.library, args.endpoint, args.base, "peer-handoff")
    peer = 1 - me
    for i in range(args.handoffs):
        while i > 0 and board.last_holder.value == me and not board.finished[peer]:
            os.sched_yield()
        board.waiting[me] = 1
        lock.acquire()
        acquired = time.monotonic_ns()
        board.waiting[me] = 0
        if board.last_holder.value == peer and board.count.value < len(board.samples):
            board.samples[board.count.value] = (acquired - board.release_started.value) / 1000
            board.count.value += 1
        board.last_holder.value = me
        while not board.waiting[peer] and not board.finished[peer]:
            os.sched_yield()
        settle_until = time.monotonic_ns() + args.settle_us * 1000
        while time.monotonic_ns() < settle_until:
            os.sched_yield()
        board.release_started.value = time.monotonic_ns()
        lock.release()
    board.finished[me] = 1
    close()


class HandoffBoard:
    def __init__(self, rounds):
        self.release_started = multiprocessing.RawValue(ctypes.c_int64, 0)
        self.last_holder = multiprocessing.RawValue(ctypes.c_int, -1)
        self.waiting = multiprocessing.RawArray(ctypes.c_int, 2)
        self.finished = multiprocessing.RawArray(ctypes.c_int, 2)
        self.count = multiprocessing.RawValue(ctypes.c_int, 0)
        self.samples = multiprocessing.RawArray(ctypes.c_double, 2 * rounds)


def handoff(args):
    board = HandoffBoard(args.handoffs)
    sides = [multiprocessing.Process(target=take_turns, args=(args, board, me)) for me in (0, 1)]
    for side in sides:
        side.start()
    for side in sides:
        side.join()
        if side.exitcode != 0:
            sys.exit(f"py_lock_bench: a handoff process failed ({side.exitcode})")
    return statistics.median(board.samples[: board.count.value])


def contend(args, me, ready, stop_at, grants):
    lock, close = make_lock(args.library, args.endpoint, args.base, "peer-contended")
    with ready.get_lock():
        ready.value += 1
    while stop_at.value == 0:
        time.sleep(0.001)
    mine = 0
    while time.monotonic_ns() < stop_at.value:
        lock.acquire()
        lock.release()
        mine += 1
    grants[me] = mine
    close()


def contention(args):
    ready = multiprocessing.Value(ctypes.c_int, 0)
    stop_at = multiprocessing.RawValue(ctypes.c_int64, 0)
    grants = multiprocessing.RawArray(ctypes.c_int64, args.contenders)
    workers = [multiprocessing.Process(target=contend, args=(args, me, ready, stop_at, grants))
               for me in range(args.contenders)]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 60
    while ready.value < args.contenders:
        if time.monotonic() > deadline or any(w.exitcode not in (None, 0) for w in workers):
            for worker in workers:
                worker.kill()
            sys.exit("py_lock_bench: a contender did not start")
        time.sleep(0.01)
    stop_at.value = time.monotonic_ns() + int(args.seconds * 1e9)
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            sys.exit(f"py_lock_bench: a contender failed ({worker.exitcode})")
    return sum(grants) / args.seconds, min(grants), max(grants)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", choices=["kazoo", "redis"])
    parser.add_argument("endpoint", help="HOST:PORT of the server")
    parser.add_argument("base", help="kazoo: the parent znode; redis: the key prefix")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--handoffs", type=int, default=500)
    parser.add_argument("--contenders", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--settle-us", type=int, default=3000)
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--uncontended-only", action="store_true")
    only.add_argument("--contended-only", action="store_true")
    args = parser.parse_args()
    if args.uncontended_only:
        print(f"uncontended_us {uncontended(args):.2f}")
        return
    # fork, as dlock-peer-bench: every process makes its own client after it starts.
    multiprocessing.set_start_method("fork")
    handed = None if args.contended_only else handoff(args)
    per_second, fewest, most = contention(args)
    if handed is not None:
        print(f"uncontended_us {uncontended(args):.2f}")
        print(f"handoff_us {handed:.2f}")
    print(f"contended_per_s {per_second:.0f}")
    print(f"contended_fewest {fewest}")
    print(f"contended_most {most}")
    if handed is not None:
        print(f"version {version(args.library)}")


if __name__ == "__main__":
    main()
