// The worker against a real server: ack on success, nack and retry after retry_after, a
// permanent failure to the dead letters and back by requeue, leases extended while a slow
// handler runs (no second delivery), a handler aborted a fifth of its lease before the lease
// ends when it cannot be extended, a claim that came back after its lease not started, a
// graceful stop that releases an unfinished message to another consumer at once (by stop()
// or SIGTERM), concurrency, and handler timeouts.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DelayqClient, PermanentError, RetryLaterError, Worker } from 'delayq';
import { startServer } from './helpers/server.js';
import { signal, uniqueQueue, waitFor, within } from './helpers/wait.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new DelayqClient({ baseUrl: server.url });
});
// Workers a failed test left running are stopped too, or they would keep the process alive.
const workers = [];
after(async () => {
  await Promise.all(workers.map((w) => w.stop({ grace: 0 })));
  await server?.stop();
});

/** A worker whose 'error' events and log lines are collected instead of printed. */
function worker(queue, handler, options = {}) {
  const errors = [];
  const logs = [];
  const w = client.worker(queue, handler, { wait: '1s', logger: { error: (line) => logs.push(line) }, ...options });
  w.on('error', (e) => errors.push(e));
  w.errors = errors;
  w.logs = logs;
  workers.push(w);
  return w;
}

test('a handler that resolves acks its message', async () => {
  const q = uniqueQueue('ok');
  const seen = signal();
  const w = worker(q, (d) => seen.resolve(d)).start();
  await client.send(q, { hello: 'world' }, { id: 'm1' });
  const d = await within(seen.promise, 5000, 'the handler to run');
  assert.deepEqual(d.payload, { hello: 'world' });
  await waitFor(async () => (await client.admin.stats(q)).in_flight === 0, { what: 'the ack' });
  assert.equal((await client.admin.stats(q)).ready, 0);
  await w.stop();
  assert.deepEqual(w.errors, []);
});

test('a worker that goes on acks each message with its next receive', async () => {
  const q = uniqueQueue('carried');
  // The real client, with the calls the worker makes counted.
  const calls = { ack: 0, receive: 0, ackAndReceive: 0, carried: 0 };
  const counted = new Proxy(client, {
    get(target, name) {
      const value = target[name];
      if (typeof value !== 'function') return value;
      return (...args) => {
        if (name in calls) calls[name] += 1;
        if (name === 'ackAndReceive') calls.carried += args[1].length;
        return value.apply(target, args);
      };
    },
  });
  for (let i = 0; i < 5; i++) await client.send(q, { i });
  const handled = [];
  const errors = [];
  const w = new Worker(counted, q, (d) => handled.push(d.payload.i), { wait: '1s' });
  w.on('error', (e) => errors.push(e));
  workers.push(w);
  w.start();
  await waitFor(async () => {
    const s = await client.admin.stats(q);
    return handled.length === 5 && s.in_flight + s.ready === 0;
  }, { what: 'every message handled and acked' });
  await w.stop();
  assert.deepEqual(handled.sort(), [0, 1, 2, 3, 4]);
  assert.equal(calls.carried, 5, 'each ack went with a receive');
  // The stop aborts the long poll that carried the last ack: not knowing whether the server
  // made it, the worker sends it again on its own (a repeat answers lease lost, not reported).
  assert.ok(calls.ack <= 1, `${calls.ack} acks on their own`);
  assert.deepEqual(errors, []);
});

test('a failed handler is nacked with its error and retried after retry_after', async () => {
  const q = uniqueQueue('retry');
  const attempts = [];
  const done = signal();
  const w = worker(q, (d) => {
    attempts.push({ attempt: d.attempt, at: Date.now() });
    if (d.attempt === 1) throw new RetryLaterError('payment service down', '300ms');
    done.resolve();
  }).start();
  await client.send(q, 'pay', { id: 'r1', backoff: { fixed: { delay: '1h' } } });
  await within(done.promise, 10_000, 'the second attempt');
  assert.deepEqual(attempts.map((a) => a.attempt), [1, 2]);
  // Retried after about 300 ms, not after the message's 1 h backoff.
  assert.ok(attempts[1].at - attempts[0].at >= 250, `retried after ${attempts[1].at - attempts[0].at} ms`);
  await w.stop();
});

test('a thrown error is kept as the last error: its type and message, then its stack', async () => {
  const q = uniqueQueue('error-text');
  const w = worker(q, () => {
    throw new Error('the database is down');
  }).start();
  await client.send(q, 'x', { id: 'e1', max_attempts: 5, backoff: { fixed: { delay: '1h' } } });
  const info = await waitFor(async () => {
    const m = await client.get(q, 'e1');
    return m.state === 'delayed' && m.last_error ? m : undefined;
  }, { what: 'the nack' });
  assert.match(info.last_error, /^Error: the database is down\n\s+at /);
  assert.equal(info.attempts, 1);
  await w.stop();
});

test('a permanent failure becomes a dead letter at once; requeue brings it back', async () => {
  const q = uniqueQueue('dead');
  let handled = 0;
  const again = signal();
  const w = worker(q, (d) => {
    handled++;
    if (d.payload.fixed !== true) throw new PermanentError('order 7 does not exist');
    again.resolve(d);
  }).start();
  await client.send(q, { fixed: false }, { id: 'p1', max_attempts: 10 });
  const page = await waitFor(async () => {
    // The list and the total are two reads: wait until both show it.
    const p = await client.admin.deadLetters(q);
    return p.total === 1 && p.dead_letters.length === 1 ? p : undefined;
  }, { what: 'the dead letter' });
  assert.equal(page.dead_letters[0].id, 'p1');
  assert.match(page.dead_letters[0].last_error, /^PermanentError: order 7 does not exist\n/);
  assert.equal(page.dead_letters[0].attempts, 1); // not retried: 9 attempts were left
  assert.equal(handled, 1);
  // Requeued (here with a fixed payload the handler accepts: requeue keeps the payload, so
  // purge and resend is how a payload changes; we requeue and let the handler see it again).
  await w.stop();
  const fixer = worker(q, (d) => {
    if (d.id === 'p1') again.resolve(d);
  }).start();
  assert.equal(await client.admin.requeue(q, { id: 'p1' }), 1);
  const d = await within(again.promise, 5000, 'the requeued message');
  assert.equal(d.attempt, 1); // attempts reset
  await waitFor(async () => (await client.admin.stats(q)).dead === 0 && (await client.admin.stats(q)).in_flight === 0, { what: 'the ack' });
  await fixer.stop();
});

test('a handler that runs longer than its lease keeps its message and is not delivered twice', async () => {
  const q = uniqueQueue('slow');
  const deliveries = [];
  const release = signal();
  const w = worker(q, async (d) => {
    deliveries.push(d.attempt);
    await release.promise;
  }, { lease: '1s', concurrency: 2 }).start();
  await client.send(q, 'slow', { id: 's1' });
  await waitFor(() => deliveries.length === 1, { what: 'the first delivery' });
  // Two and a half leases pass while the handler runs; the lease is extended, so neither another
  // consumer nor the worker's second slot gets the message.
  const until = Date.now() + 2500;
  while (Date.now() < until) {
    assert.deepEqual(await client.receive(q, { wait: '300ms' }), []);
    assert.equal((await client.get(q, 's1')).state, 'in_flight');
  }
  release.resolve();
  await waitFor(async () => (await client.admin.stats(q)).in_flight === 0, { what: 'the ack' });
  await assert.rejects(client.get(q, 's1'), { code: 'not_found' });
  assert.deepEqual(deliveries, [1]);
  await w.stop();
  assert.deepEqual(w.errors, []);
});

test('a claim whose reply came after its lease ended is not started', async () => {
  const q = uniqueQueue('late');
  // A real server behind a slow network: the first receive's answer arrives 1.2 s late,
  // after the 400 ms lease of what it claimed.
  let delayed = false;
  const slowFetch = async (url, init) => {
    const response = await fetch(url, init);
    if (!delayed && String(url).endsWith('/receive')) {
      const body = await response.text();
      if (body.includes('"id"')) {
        delayed = true;
        await new Promise((ok) => setTimeout(ok, 1200));
      }
      return new Response(body, { status: response.status, headers: response.headers });
    }
    return response;
  };
  const slow = new DelayqClient({ baseUrl: server.url, fetch: slowFetch });
  await client.send(q, 'x', { id: 'late1' });
  const attempts = [];
  const w = slow.worker(q, (d) => attempts.push(d.attempt), { lease: '400ms', wait: '1s' });
  w.on('error', () => {});
  workers.push(w);
  w.start();
  await waitFor(() => attempts.length > 0, { what: 'the message to be handled' });
  await waitFor(async () => (await client.admin.stats(q)).in_flight === 0, { what: 'the ack' });
  // The stale claim (attempt 1) was dropped; the message was handled once, on its next claim.
  assert.ok(delayed);
  assert.deepEqual(attempts, [2]);
  await w.stop();
});

test('a handler whose lease cannot be extended is aborted well before the lease ends', async () => {
  const q = uniqueQueue('margin');
  // The server becomes unreachable for extends: each hangs until it is given up. Cancelling
  // only once an extend fails would leave the handler running while the message is handed
  // to someone else; the worker keeps a margin of a fifth of the lease.
  let cut = false;
  const cutFetch = (url, init) => {
    if (cut && String(url).endsWith('/extend')) {
      return new Promise((_, fail) => init?.signal?.addEventListener('abort', () => fail(init.signal.reason)));
    }
    return fetch(url, init);
  };
  const cutOff = new DelayqClient({ baseUrl: server.url, fetch: cutFetch });
  let startedAt;
  let abortedAt;
  const w = cutOff.worker(q, async (d, { signal: aborted }) => {
    startedAt = Date.now();
    await new Promise((ok) => aborted.addEventListener('abort', ok));
    abortedAt = Date.now();
  }, { lease: '1500ms', wait: '1s' });
  w.on('error', () => {});
  workers.push(w);
  w.start();
  await client.send(q, 'x', { id: 'm1' });
  await waitFor(() => startedAt !== undefined, { what: 'the handler to start' });
  cut = true;
  await waitFor(() => abortedAt !== undefined, { what: 'the handler to be aborted' });
  const ran = abortedAt - startedAt;
  assert.ok(ran <= 1500 - 150, `the handler ran ${ran} ms of its 1500 ms lease unrenewed before it was aborted`);
  cut = false;
  await w.stop();
});

test('stop() releases an unfinished message so that another consumer gets it at once', async () => {
  const q = uniqueQueue('stop');
  const started = signal();
  let aborted;
  const w = worker(q, (d, { signal: s }) => new Promise((resolve) => {
    started.resolve(d);
    s.addEventListener('abort', () => {
      aborted = s.reason;
      resolve();
    });
  }), { lease: '60s' }).start();
  await client.send(q, 'long job', { id: 'g1' });
  await within(started.promise, 5000, 'the handler to start');
  const t0 = Date.now();
  await w.stop({ grace: '200ms' });
  assert.ok(aborted instanceof Error, 'the handler was told to stop');
  // Its lease was 60 s; released, it is ready now, attempt not counted.
  const [d] = await client.receive(q);
  assert.ok(d, 'another consumer got the message at once');
  assert.equal(d.id, 'g1');
  assert.equal(d.attempt, 1);
  assert.ok(Date.now() - t0 < 5000);
  await client.ack(q, d.receipt);
});

test('stop() waits for handlers that finish within the grace period, and they are acked', async () => {
  const q = uniqueQueue('grace');
  const started = signal();
  const finish = signal();
  const w = worker(q, async () => {
    started.resolve();
    await finish.promise;
  }).start();
  await client.send(q, 'x', { id: 'f1' });
  await within(started.promise, 5000, 'the handler to start');
  const stopping = w.stop({ grace: '10s' });
  finish.resolve();
  await stopping;
  await assert.rejects(client.get(q, 'f1'), { code: 'not_found' });
});

test('concurrency N runs N handlers at once', async () => {
  const q = uniqueQueue('conc');
  let running = 0;
  let peak = 0;
  const go = signal();
  const w = worker(q, async () => {
    running++;
    peak = Math.max(peak, running);
    await go.promise;
    running--;
  }, { concurrency: 3 }).start();
  await client.sendBatch(q, Array.from({ length: 5 }, (_, n) => ({ payload: n })));
  await waitFor(() => running === 3, { what: 'three handlers running' });
  assert.equal(w.active, 3);
  go.resolve();
  await waitFor(async () => {
    const s = await client.admin.stats(q);
    return s.ready + s.in_flight === 0;
  }, { what: 'all five handled' });
  assert.equal(peak, 3);
  await w.stop();
});

test('a handler past its handler_timeout fails the attempt', async () => {
  const q = uniqueQueue('timeout');
  const w = worker(q, () => new Promise(() => {})).start();
  await client.send(q, 'stuck', { id: 't1', handler_timeout: '200ms', backoff: { fixed: { delay: '1h' } } });
  const info = await waitFor(async () => {
    const m = await client.get(q, 't1');
    return m.last_error ? m : undefined;
  }, { what: 'the timeout nack' });
  assert.match(info.last_error, /handler timed out after 200 ms/);
  await w.stop({ grace: 0 });
});

test('with handleSignals, SIGTERM stops the worker process and releases its message', async () => {
  const q = uniqueQueue('sigterm');
  const child = spawn(process.execPath, [fileURLToPath(new URL('./helpers/signal-worker.js', import.meta.url))], {
    env: { ...process.env, DELAYQ_URL: server.url, QUEUE: q },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (b) => (out += b));
  child.stderr.on('data', (b) => (out += b));
  const exited = new Promise((ok) => child.once('exit', ok));
  try {
    await client.send(q, 'job', { id: 'sig1' });
    await waitFor(() => out.includes('started sig1'), { what: 'the handler to start' });
    child.kill('SIGTERM');
    assert.equal(await within(exited, 10_000, 'the worker process to exit'), 0, out);
    assert.match(out, /stopped/);
    // Its lease was 60 s; released on the way out, it is ready now.
    const [d] = await client.receive(q);
    assert.equal(d?.id, 'sig1', 'released for another consumer');
    assert.equal(d.attempt, 1);
    await client.ack(q, d.receipt);
  } finally {
    child.kill('SIGKILL');
  }
});
