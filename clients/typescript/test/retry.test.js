// Retries on 503: with the server's Redis frozen (SIGSTOP to the embedded redis-server this
// test's own server started), the server answers 503 `unavailable`; an idempotent call (a
// GET, a send with a caller id) is retried with backoff and succeeds once Redis is back,
// while a call that is not safe to repeat (a send without an id) fails at once, typed.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { DelayqClient, UnavailableError } from 'delayq';
import { startServer } from './helpers/server.js';
import { uniqueQueue } from './helpers/wait.js';

let server;
let redisPid;
before(async () => {
  server = await startServer(['--redis-timeout', '300ms']);
  redisPid = await childNamed(server.pid, 'redis-server');
});
after(async () => {
  if (redisPid) process.kill(redisPid, 'SIGCONT');
  await server?.stop();
});

/** The pid of `parent`'s child process called `name`, from /proc. */
async function childNamed(parent, name) {
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // pid (comm) state ppid ...
    const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(stat);
    if (m && m[1] === name && Number(m[2]) === parent) return Number(entry);
  }
  throw new Error(`no ${name} child of ${parent}`);
}

test('idempotent calls are retried on 503 until Redis is back; others fail typed', async () => {
  const q = uniqueQueue('retry');
  const retries = [];
  const client = new DelayqClient({
    baseUrl: server.url,
    retries: 6,
    retryBaseMs: 50,
    onRetry: (info) => {
      retries.push(info);
      // Redis comes back once the first retry is under way: the retry must then succeed.
      if (retries.length === 1) process.kill(redisPid, 'SIGCONT');
    },
  });
  await client.send(q, { n: 1 }, { id: 'kept' });

  process.kill(redisPid, 'SIGSTOP');
  // Not safe to repeat: no retry, a typed 503.
  const error = await client.send(q, { n: 2 }).catch((e) => e);
  assert.ok(error instanceof UnavailableError, String(error));
  assert.equal(error.status, 503);
  assert.equal(error.code, 'unavailable');
  assert.equal(retries.length, 0);

  // A GET is retried, and answers once Redis is back.
  const info = await client.get(q, 'kept');
  assert.deepEqual(info.payload, { n: 1 });
  assert.ok(retries.length >= 1);
  assert.equal(retries[0].error.status, 503);
  assert.equal(retries[0].request, 'GET /v1/queues/{queue}/messages/{id}');

  // A send with a caller id is retried too.
  retries.length = 0;
  process.kill(redisPid, 'SIGSTOP');
  const sent = await client.send(q, { n: 3 }, { id: 'again' });
  assert.equal(sent.id, 'again');
  assert.ok(retries.length >= 1);

  // With no retries left, the 503 reaches the caller.
  retries.length = 0;
  process.kill(redisPid, 'SIGSTOP');
  const noRetry = await client.get(q, 'kept', { retries: 0 }).catch((e) => e);
  process.kill(redisPid, 'SIGCONT');
  assert.ok(noRetry instanceof UnavailableError, String(noRetry));
});
