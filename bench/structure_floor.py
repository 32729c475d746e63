"""What the structure work of a batched message costs Redis, with no script around it: the
floor under W2a and W2b, whatever a script does besides.

Starts its own redis-server on a free loopback port (no persistence), then runs, for
100,000 messages of W2's shape, the commands delayq's batches run for each message, in
batches as big as theirs, each phase sent pipelined (built first, then written in one go,
so the server never waits on this client), and prints the server's CPU (INFO cpu, user +
sys) per message for each phase:

    send     ZADD pending (1,000 records of 120 bytes a command)
    claim    ZRANGE + ZREMRANGEBYRANK pending, HSET held, ZADD leases (500 a claim)
    ack      ZMSCORE leases, HMGET held, ZREM leases, HDEL held (500 an ack)

for the leased queue of data format 5 (a lease per message), then for format 6's (a lease
per claim: one leases member and one claims field for the 500, each message's place its seq
and flags byte):

    claim    ZRANGE + ZREMRANGEBYRANK pending, HSET held, ZADD leases (one), HSET claims
    ack      ZMSCORE leases (the messages' own: none), HMGET claims, ZMSCORE leases (the
             claim's), HDEL held, HDEL claims, ZREM leases (the acks of a whole claim)

and, for comparison, the least any sorted-set queue does: ZADD, then ZPOPMIN.
BENCHMARKS.md, "Issue 33, fifth step", quotes it.

    python3 bench/structure_floor.py [runs]        # default 3
"""
import os
import sys
import time

from resp import Conn, command, cpu_seconds, redis_server

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
N = 100_000
SEND_BATCH, CLAIM_BATCH = 1000, 500
# A W2 record: a 13-byte sort key (due µs, sequence), flags and attempts, the 100-byte payload.
RECORD = 120


def records() -> list:
    # Sort keys in due order, then payload bytes; distinct, as delayq's are.
    return [i.to_bytes(13, "big") + os.urandom(RECORD - 13) for i in range(N)]


def seq(rec: bytes) -> bytes:
    return rec[7:13]


def run(conn: Conn) -> dict:
    conn.call("FLUSHALL")
    recs = records()
    deadline = b"%d" % (int(time.time() * 1000) + 30_000)
    phases = {}

    def measure(name: str, commands: list) -> None:
        before = cpu_seconds(conn)
        conn.pipeline(commands)
        phases[name] = (cpu_seconds(conn) - before) * 1e6 / N

    sends = []
    for i in range(0, N, SEND_BATCH):
        args = [b"ZADD", b"pending"]
        for r in recs[i:i + SEND_BATCH]:
            args += [b"0", r]
        sends.append(command(*args))
    measure("send: ZADD pending", sends)

    claims = []
    for i in range(0, N, CLAIM_BATCH):
        batch = recs[i:i + CLAIM_BATCH]
        held = [b"HSET", b"held"]
        leases = [b"ZADD", b"leases"]
        for r in batch:
            held += [seq(r), b"tokenA\x00\x01" + r]
            leases += [deadline, seq(r) + b"tokenA"]
        claims += [
            command(b"ZRANGE", b"pending", b"0", b"%d" % (CLAIM_BATCH - 1)),
            command(b"ZREMRANGEBYRANK", b"pending", b"0", b"%d" % (CLAIM_BATCH - 1)),
            command(*held),
            command(*leases),
        ]
    measure("claim: ZRANGE, ZREMRANGEBYRANK, HSET held, ZADD leases", claims)

    acks = []
    for i in range(0, N, CLAIM_BATCH):
        batch = recs[i:i + CLAIM_BATCH]
        members = [seq(r) + b"tokenA" for r in batch]
        seqs = [seq(r) for r in batch]
        acks += [
            command(b"ZMSCORE", b"leases", *members),
            command(b"HMGET", b"held", *seqs),
            command(b"ZREM", b"leases", *members),
            command(b"HDEL", b"held", *seqs),
        ]
    measure("ack: ZMSCORE, HMGET, ZREM, HDEL", acks)

    # Format 6: the same messages again, a lease per claim.
    conn.call("FLUSHALL")
    conn.pipeline(sends)
    claims = []
    for i in range(0, N, CLAIM_BATCH):
        batch = recs[i:i + CLAIM_BATCH]
        base = b"%06d" % i
        held = [b"HSET", b"held"]
        places = [len(batch).to_bytes(2, "big")]
        for r in batch:
            held += [seq(r), b"tokenA\x00\x01" + r]
            places.append(seq(r) + b"\x00")
        claims += [
            command(b"ZRANGE", b"pending", b"0", b"%d" % (CLAIM_BATCH - 1)),
            command(b"ZREMRANGEBYRANK", b"pending", b"0", b"%d" % (CLAIM_BATCH - 1)),
            command(*held),
            command(b"ZADD", b"leases", deadline, base),
            command(b"HSET", b"claims", base, b"".join(places)),
        ]
    measure("6 claim: ZRANGE, ZREMRANGEBYRANK, HSET held, ZADD leases, HSET claims", claims)
    acks = []
    for i in range(0, N, CLAIM_BATCH):
        batch = recs[i:i + CLAIM_BATCH]
        base = b"%06d" % i
        members = [seq(r) + b"tokenA" for r in batch]
        acks += [
            command(b"ZMSCORE", b"leases", *members),
            command(b"HMGET", b"claims", base),
            command(b"ZMSCORE", b"leases", base),
            command(b"HDEL", b"held", *[seq(r) for r in batch]),
            command(b"HDEL", b"claims", base),
            command(b"ZREM", b"leases", base),
        ]
    measure("6 ack: ZMSCORE, HMGET claims, ZMSCORE, HDEL held, HDEL claims, ZREM", acks)

    conn.call("FLUSHALL")
    measure("least: ZADD", sends)
    pops = [command(b"ZPOPMIN", b"pending", b"%d" % CLAIM_BATCH) for _ in range(0, N, CLAIM_BATCH)]
    measure("least: ZPOPMIN", pops)
    return phases


def main() -> None:
    with redis_server() as port:
        conn = Conn(port)
        for r in range(RUNS):
            phases = run(conn)
            send = phases["send: ZADD pending"]
            five = sum(v for k, v in phases.items() if k.startswith(("claim", "ack")))
            six = sum(v for k, v in phases.items() if k.startswith("6 "))
            least = sum(v for k, v in phases.items() if k.startswith("least"))
            print(f"run {r + 1}: " + "; ".join(f"{k} {v:.2f}" for k, v in phases.items()))
            print(f"run {r + 1}: delayq's structures, format 5 {send + five:.2f} us/msg, "
                  f"format 6 {send + six:.2f} us/msg; the least {least:.2f} us/msg")


if __name__ == "__main__":
    main()
