// Runs examples/service.js against a real server: it must send, handle the due orders with
// its worker, receive the emails by push through its verifying receiver, and exit 0 by
// itself once done. In CI this runs from the folder the packed tarball was installed into,
// so the example imports 'delayq' as a user's program does.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DelayqClient } from 'delayq';
import { startServer } from './helpers/server.js';
import { uniqueQueue, waitFor, within } from './helpers/wait.js';

let server;
before(async () => {
  server = await startServer(['--push-allow', '127.0.0.1']);
});
after(() => server?.stop());

test('examples/service.js sends, works, receives pushes and exits 0', async () => {
  const prefix = uniqueQueue('shop');
  const child = spawn(process.execPath, [fileURLToPath(new URL('../examples/service.js', import.meta.url))], {
    env: { ...process.env, DELAYQ_URL: server.url, QUEUE_PREFIX: prefix, DEADLINE_MS: '20000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let doneAt;
  child.stdout.on('data', (b) => {
    out += b;
    if (doneAt === undefined && /done: /.test(out)) doneAt = Date.now();
  });
  child.stderr.on('data', (b) => (out += b));
  const code = await within(new Promise((ok) => child.once('exit', ok)), 30_000, 'the example to exit').catch((e) => {
    child.kill('SIGKILL');
    // What it printed says how far it got before it hung.
    throw new Error(`${e.message}; its output:\n${out}`);
  });
  assert.equal(code, 0, out);
  // Once its work is done, nothing of the client's keeps it alive (a worker's stop() leaves
  // no call or timer behind): it exits by itself, not seconds later when some timeout ends.
  const lingered = Date.now() - doneAt;
  assert.ok(lingered < 5_000, `the process lived ${lingered} ms after printing "done"`);
  assert.match(out, /order 2 paid; its closing cancelled/);
  assert.match(out, /email pushed: order 1 was closed unpaid/);
  assert.match(out, /email pushed: order 3 was closed unpaid/);
  assert.doesNotMatch(out, /order 2 was closed/);
  assert.match(out, /worker stopped/);
  assert.match(out, /done: 2 emails/);
  assert.doesNotMatch(out, /still running/);
  // Nothing left behind: every order settled, the emails acked, the push target removed.
  const client = new DelayqClient(server.url);
  for (const q of [`${prefix}-close-orders`, `${prefix}-emails`]) {
    // The server records a push's ack just after the receiver answers: wait for it.
    await waitFor(async () => {
      const s = await client.admin.stats(q);
      return s.delayed + s.ready + s.in_flight + s.dead === 0;
    }, { what: `${q} to be empty` });
  }
  await assert.rejects(client.admin.getPushTarget(`${prefix}-emails`), { code: 'not_found' });
});
