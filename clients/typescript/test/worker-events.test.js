// The worker's voice and reach: 'completed', 'failed' and 'error' events; each failed
// handler logged with its stack through the logger (console by default), unless logErrors
// is false; a listener that throws cannot break it; one worker serving several queues in
// strict order or by weight, settling each delivery at its queue; and a stop that leaves
// no call of the worker's in flight.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DelayqClient, PermanentError, Worker, WorkerStoppedError } from 'delayq';
import { startServer } from './helpers/server.js';
import { signal, uniqueQueue, waitFor, within } from './helpers/wait.js';

let server;
let client;
const workers = [];
before(async () => {
  server = await startServer();
  client = new DelayqClient({ baseUrl: server.url });
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop({ grace: 0 })));
  await server?.stop();
});

function track(w) {
  workers.push(w);
  return w;
}

/** Resolves once `queues` hold nothing delayed, ready or in flight. */
async function drained(...queues) {
  await waitFor(async () => {
    for (const q of queues) {
      const s = await client.admin.stats(q);
      if (s.delayed + s.ready + s.in_flight > 0) return false;
    }
    return true;
  }, { what: `${queues.join(', ')} to be drained` });
}

test("'completed' carries the delivery and the handler's result; 'failed' the delivery and the error", async () => {
  const q = uniqueQueue('events');
  const logs = [];
  const completed = [];
  const failed = [];
  const w = track(client.worker(q, (d) => {
    if (d.payload.ok) return { closed: d.id };
    throw new PermanentError(`order ${d.id} is gone`);
  }, { wait: '1s', logger: { error: (line) => logs.push(line) } }));
  w.on('completed', (d, result) => completed.push([d.id, result]));
  w.on('failed', (d, error) => failed.push([d.id, error]));
  w.start();
  await client.send(q, { ok: true }, { id: 'good' });
  await client.send(q, { ok: false }, { id: 'bad' });
  await waitFor(() => completed.length === 1 && failed.length === 1, { what: 'both events' });
  await drained(q);
  await w.stop();
  assert.deepEqual(completed, [['good', { closed: 'good' }]]);
  assert.equal(failed[0][0], 'bad');
  assert.ok(failed[0][1] instanceof PermanentError);
  // Only the failure is logged, with its stack; the success is not.
  assert.equal(logs.length, 1);
  assert.match(logs[0], /^delayq worker: message bad of .* \(attempt 1\) failed: PermanentError: order bad is gone\n\s+at /);
  const dead = (await client.admin.deadLetters(q)).dead_letters[0];
  assert.match(dead.last_error, /^PermanentError: order bad is gone\n/);
});

test('failures go to console.error by default, and logErrors: false silences the worker', async () => {
  const q = uniqueQueue('logs');
  const printed = [];
  const original = console.error;
  console.error = (...args) => printed.push(args.join(' '));
  try {
    const loud = track(client.worker(q, () => {
      throw new TypeError('payload.order is undefined');
    }, { wait: '1s' })).start();
    await client.send(q, 1, { id: 'l1', max_attempts: 1 });
    await waitFor(() => printed.length > 0, { what: 'the console line' });
    await loud.stop();
    assert.match(printed[0], /failed: TypeError: payload\.order is undefined\n\s+at /);

    printed.length = 0;
    const failed = [];
    const quiet = track(client.worker(q, () => {
      throw new Error('not logged');
    }, { wait: '1s', logErrors: false }));
    quiet.on('failed', (d) => failed.push(d.id));
    quiet.start();
    await client.send(q, 2, { id: 'l2', max_attempts: 1 });
    await waitFor(() => failed.length === 1, { what: "the 'failed' event" });
    await quiet.stop();
    assert.deepEqual(printed, []);
  } finally {
    console.error = original;
  }
});

test("a failure that is not a handler's is an 'error' event when listened to, else logged", async () => {
  const q = uniqueQueue('receive-errors');
  // A network that fails each worker's first receive.
  const flaky = () => {
    let failedOnce = false;
    return new DelayqClient({
      baseUrl: server.url,
      fetch: (url, init) => {
        if (!failedOnce && String(url).endsWith('/receive')) {
          failedOnce = true;
          return Promise.reject(new TypeError('fetch failed'));
        }
        return fetch(url, init);
      },
    });
  };
  const errors = [];
  const logs = [];
  const heard = track(flaky().worker(q, () => {}, { wait: '1s', errorBackoff: '10ms', logger: { error: (l) => logs.push(l) } }));
  heard.on('error', (e) => errors.push(e));
  heard.start();
  await waitFor(() => errors.length === 1, { what: "the 'error' event" });
  await heard.stop();
  assert.equal(errors[0].code, 'connection_failed');
  assert.deepEqual(logs, [], 'not logged when listened to');

  const unheard = track(flaky().worker(q, () => {}, { wait: '1s', errorBackoff: '10ms', logger: { error: (l) => logs.push(l) } })).start();
  await waitFor(() => logs.length === 1, { what: 'the log line' });
  await unheard.stop();
  assert.match(logs[0], /^delayq worker \(.*\): ConnectionError: POST \/v1\/queues\/\{queue\}\/receive: /);
});

test("a listener that throws does not keep the message from being acked", async () => {
  const q = uniqueQueue('listener');
  const logs = [];
  const w = track(client.worker(q, () => 'ok', { wait: '1s', logger: { error: (l) => logs.push(l) } }));
  w.on('completed', () => {
    throw new Error('listener bug');
  });
  w.start();
  await client.send(q, 1, { id: 'c1' });
  await drained(q);
  await waitFor(() => logs.length === 1, { what: 'the log line' });
  await w.stop();
  assert.match(logs[0], /a 'completed' listener threw: Error: listener bug/);
  await assert.rejects(client.get(q, 'c1'), { code: 'not_found' });
});

test('a worker serves several queues in strict order, settling each delivery at its queue', async () => {
  const high = uniqueQueue('high');
  const low = uniqueQueue('low');
  for (let n = 0; n < 3; n++) await client.send(low, { q: 'low', n });
  for (let n = 0; n < 3; n++) await client.send(high, { q: 'high', n });
  const seen = [];
  const w = track(client.worker({ queues: [high, low] }, (d) => {
    seen.push(`${d.payload.q}${d.payload.n}`);
    assert.equal(d.queue, d.payload.q === 'high' ? high : low);
  }, { wait: '1s' }));
  w.on('error', (e) => seen.push(`error ${e}`));
  assert.deepEqual(w.queues, [high, low]);
  w.start();
  await waitFor(() => seen.length === 6, { what: 'six deliveries' });
  await drained(high, low);
  await w.stop();
  // With concurrency 1, each receive takes one: every high one before any low one.
  assert.deepEqual(seen, ['high0', 'high1', 'high2', 'low0', 'low1', 'low2']);
});

test('a worker serves queues by weight, and keeps the leases of each queue', async () => {
  const a = uniqueQueue('wa');
  const b = uniqueQueue('wb');
  await client.send(a, 'a', { id: 'slow-a' });
  await client.send(b, 'b', { id: 'slow-b' });
  const running = new Set();
  const go = signal();
  const deliveries = [];
  const w = track(client.worker({ weights: { [a]: 3, [b]: 1 } }, async (d) => {
    deliveries.push(`${d.queue === a ? 'a' : 'b'}:${d.id}:${d.attempt}`);
    running.add(d.id);
    await go.promise;
  }, { wait: '1s', lease: '1s', concurrency: 2 }));
  w.on('error', (e) => deliveries.push(`error ${e}`));
  w.start();
  await waitFor(() => running.size === 2, { what: 'both handlers running' });
  // Two leases pass; each queue's lease is extended, so neither message comes back.
  const until = Date.now() + 2_200;
  while (Date.now() < until) {
    for (const q of [a, b]) assert.deepEqual(await client.receive(q, { wait: '200ms' }), []);
  }
  go.resolve();
  await drained(a, b);
  await w.stop();
  assert.deepEqual(deliveries.sort(), ['a:slow-a:1', 'b:slow-b:1']);
});

test('stop() leaves no call of the worker in flight, and releases what it gave up on to its queue', async () => {
  const q1 = uniqueQueue('stop1');
  const q2 = uniqueQueue('stop2');
  // The real client, with the worker's calls in flight counted.
  let inFlight = 0;
  const counted = new Proxy(client, {
    get(target, name) {
      const value = target[name];
      if (typeof value !== 'function') return value;
      return (...args) => {
        inFlight++;
        return Promise.resolve(value.apply(target, args)).finally(() => inFlight--);
      };
    },
  });
  const started = new Set();
  let aborted;
  const w = track(new Worker(counted, [q1, q2], (d, { signal: s }) => new Promise((resolve) => {
    started.add(d.id);
    s.addEventListener('abort', () => {
      aborted = s.reason;
      resolve();
    });
  }), { wait: '5s', concurrency: 3, lease: '900ms', extendEvery: '50ms' }));
  w.on('error', () => {});
  w.start();
  await client.send(q1, 'x', { id: 'one' });
  await client.send(q2, 'y', { id: 'two' });
  await waitFor(() => started.size === 2, { what: 'both handlers running' });
  // Extensions run every 50 ms and a long poll waits: stop with both under way.
  await within(w.stop({ grace: '100ms' }), 5_000, 'stop()');
  assert.equal(inFlight, 0, 'no call of the worker outlives stop()');
  assert.ok(aborted instanceof WorkerStoppedError);
  for (const [q, id] of [[q1, 'one'], [q2, 'two']]) {
    const [d] = await client.receive(q);
    assert.equal(d?.id, id, `${id} released to ${q}, ready at once`);
    assert.equal(d.attempt, 1);
    await client.ack(q, d.receipt);
  }
});

test('stop() before start() resolves, and the worker never starts', async () => {
  const w = client.worker(uniqueQueue('idle'), () => {});
  await w.stop();
  assert.throws(() => w.start(), /worker is stopped/);
});
