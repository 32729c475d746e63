// Starts a real `delayq serve` for a test file: a free loopback port, a fresh data directory
// (its embedded redis-server listens only on a unix socket there, never on 6379), waits for
// /healthz with a deadline, and stops it with SIGTERM (it then stops its Redis).
// The binary comes from DELAYQ_BIN, else the workspace's release build.

import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const DELAYQ_BIN = process.env.DELAYQ_BIN || resolve(here, '../../../../target/release/delayq');

/** A port free right now on 127.0.0.1. */
export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

/**
 * Runs `delayq serve` with `args` added (e.g. ['--push-allow', '127.0.0.1']).
 * Answers { url, pid, stop(), log() }. Retries on another port if the first is taken.
 */
export async function startServer(args = [], { deadlineMs = 15_000 } = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'delayq-ts-'));
  for (let tries = 0; ; tries++) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const child = spawn(DELAYQ_BIN, [
      'serve', '--listen', `127.0.0.1:${port}`, '--data-dir', join(dir, `data-${tries}`),
      '--redis-maxmemory', '256mb', ...args,
    ], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (b) => (output += b));
    child.stderr.on('data', (b) => (output += b));
    const exited = new Promise((ok) => child.once('exit', (code, signal) => ok({ code, signal })));
    child.once('error', (e) => (output += `\nspawn error: ${e.message}`));
    const up = await waitHealthy(url, exited, deadlineMs);
    if (up) {
      const stop = async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
          await exited;
          clearTimeout(timer);
        }
        await rm(dir, { recursive: true, force: true });
      };
      return { url, pid: child.pid, stop, log: () => output };
    }
    child.kill('SIGKILL');
    await exited;
    // A port taken between freePort() and the bind: try another, a few times.
    if (tries >= 2 || !/address|in use/i.test(output)) {
      await rm(dir, { recursive: true, force: true });
      throw new Error(`delayq serve (${DELAYQ_BIN}) did not become healthy:\n${output}`);
    }
  }
}

/** True once GET /healthz answers 200; false if the process exits or the deadline passes. */
async function waitHealthy(url, exited, deadlineMs) {
  let gone = false;
  exited.then(() => (gone = true));
  const deadline = Date.now() + deadlineMs;
  while (!gone && Date.now() < deadline) {
    try {
      const r = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      if (r.ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((ok) => setTimeout(ok, 25));
  }
  return false;
}
