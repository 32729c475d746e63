"""What bench/floor.py and bench/structure_floor.py share: a redis-server of their own on a
free loopback port (no persistence), a RESP connection with just enough of the protocol,
and the server's CPU (INFO cpu, user + sys)."""
import contextlib
import socket
import subprocess
import tempfile
import time


def command(*args) -> bytes:
    """One command in RESP; each argument str or bytes."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        data = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class Conn:
    """A RESP connection: enough of the protocol to read any reply these scripts get."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    def call(self, *args):
        self.sock.sendall(command(*args))
        return self.reply()

    def pipeline(self, commands: list) -> None:
        """Writes the commands (each from `command`) in one go, then reads their replies."""
        self.sock.sendall(b"".join(commands))
        for _ in commands:
            self.reply()

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
    text = conn.call("INFO", "cpu").decode()
    info = dict(l.split(":", 1) for l in text.splitlines() if ":" in l)
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


@contextlib.contextmanager
def redis_server():
    """Starts redis-server on a free loopback port; yields the port, and stops it after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as data:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", data], stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    Conn(port).call("PING")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            yield port
        finally:
            server.terminate()
            server.wait()
