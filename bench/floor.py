"""What a call costs Redis at a low rate, whatever it runs: the floor under the calls a
workload like W3 makes (one message every 5 ms).

Starts its own redis-server on a free loopback port (no persistence), sends one command
every 1/rate s for `secs` seconds, and prints the server's CPU (INFO cpu, user + sys) per
call: for PING, for PING from two clients taking turns, and for FCALL of a function that
only reads TIME. Then the idle server's CPU per second. BENCHMARKS.md, "Issue 33, fourth
step", quotes it.

    python3 bench/floor.py [rate] [secs]        # default 200 10
"""
import sys
import time

from resp import Conn, cpu_seconds, redis_server

RATE = float(sys.argv[1]) if len(sys.argv) > 1 else 200.0
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0


def paced(conns, command, n: int) -> None:
    start = time.monotonic()
    for i in range(n):
        conns[i % len(conns)].call(*command)
        wait = start + (i + 1) / RATE - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def main() -> None:
    with redis_server() as port:
        a, b = Conn(port), Conn(port)
        a.call("FUNCTION", "LOAD", "#!lua name=floor\n"
               "redis.register_function('t', function() return redis.call('TIME') end)")
        n = int(RATE * SECS)
        for name, command, conns in [("PING", ("PING",), [a]),
                                     ("PING, two clients taking turns", ("PING",), [a, b]),
                                     ("FCALL of a function that runs TIME", ("FCALL", "t", "0"), [a])]:
            before = cpu_seconds(a)
            paced(conns, command, n)
            used = cpu_seconds(a) - before
            print(f"{name}: {n} calls at {RATE:.0f}/s, Redis CPU {used * 1e6 / n:.1f} us per call")
        before = cpu_seconds(a)
        time.sleep(SECS)
        idle = (cpu_seconds(a) - before) / SECS
        print(f"idle: {idle * 1e6:.0f} us of CPU per second, {idle * 1e6 / RATE:.1f} us per message at {RATE:.0f}/s")


if __name__ == "__main__":
    main()
