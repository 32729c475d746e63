#!/usr/bin/env python3
"""Draws a soak run (`delayq-chaos soak`): memory and queue size over time, and the lateness
of deliveries per 10 s window, as one PNG.

    python3 crates/delayq-chaos/soak_plot.py RUN_DIR OUT.png

Needs matplotlib (`pip install matplotlib`); by hand only, never in CI.
"""

import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def lines(path):
    with open(path) as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                pass


def main(run_dir, out):
    samples = list(lines(os.path.join(run_dir, "samples.jsonl")))
    t0 = samples[0]["t"]
    minutes = [(s["t"] - t0) / 60 for s in samples]

    fig, (mem, queue, late) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    for key, label in [
        ("server_rss_kb", "delayq serve RSS"),
        ("worker_rss_kb", "library worker RSS"),
        ("consumer_rss_kb", "HTTP consumer RSS"),
    ]:
        mem.plot(minutes, [s[key] / 1024 for s in samples], label=label)
    mem.plot(minutes, [s["redis_used_bytes"] / 2**20 for s in samples], label="Redis used_memory")
    mem.set_ylabel("MB")
    mem.legend(loc="upper right", fontsize="small")
    mem.set_title("delayq soak: memory, queue size, lateness")

    queue.plot(minutes, [s["pending"] for s in samples], label="pending")
    queue.plot(minutes, [s["in_flight"] for s in samples], label="in flight")
    queue.set_ylabel("messages")
    queue.legend(loc="upper right", fontsize="small")

    for path in sorted(glob.glob(os.path.join(run_dir, "*-*.jsonl"))):
        name = os.path.basename(path)
        if not (name.startswith("worker-") or name.startswith("consumer-")):
            continue
        windows = [w for w in lines(path) if w.get("n")]
        kind = "worker" if name.startswith("worker-") else "HTTP consumer"
        xs = [(w["t"] - t0) / 60 for w in windows]
        late.plot(xs, [w["p99_ms"] for w in windows], label=f"{kind} p99")
        late.plot(xs, [w["p50_ms"] for w in windows], label=f"{kind} p50", linestyle="dotted")
    late.set_ylabel("ms late (per 10 s)")
    late.set_xlabel("minutes")
    late.set_ylim(bottom=0)
    late.legend(loc="upper right", fontsize="small")

    fig.tight_layout()
    fig.savefig(out, dpi=80)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
