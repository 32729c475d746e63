"""What a call costs Redis at a low rate, whatever it runs: the floor under the calls a
workload like W3 makes (one message every 5 ms).

Starts its own redis-server on a free loopback port (no persistence), sends one command
every 1/rate s for `secs` seconds, and prints the server's CPU (INFO cpu, user + sys) per
call: for PING, for PING from two clients taking turns, and for FCALL of a function that
only reads TIME. Then the idle server's CPU per second. BENCHMARKS.md, "Issue 33, fourth
step", quotes it.

    python3 bench/floor.py [rate] [secs]        # default 200 10
"""
import socket
import subprocess
import sys
import tempfile
import time

RATE = float(sys.argv[1]) if len(sys.argv) > 1 else 200.0
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    """A RESP connection: enough of the protocol for these replies."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args: str):
        out = b"*%d\r\n" % len(args)
        for a in args:
            data = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(data), data)
        self.sock.sendall(out)
        return self.reply()

    def reply(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        return rest


def cpu_seconds(conn: Conn) -> float:
    info = dict(l.split(":", 1) for l in conn.call("INFO", "cpu").decode().splitlines() if ":" in l)
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def paced(conns, command, n: int) -> None:
    start = time.monotonic()
    for i in range(n):
        conns[i % len(conns)].call(*command)
        wait = start + (i + 1) / RATE - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def main() -> None:
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", data], stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    a = Conn(port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            b = Conn(port)
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
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
