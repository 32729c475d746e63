// The clients' shared scenarios (clients/SCENARIOS.md), S1 to S9, each a test whose name
// holds its id, against a real `delayq serve` (started with --push-allow 127.0.0.1 for S7;
// S8 starts one of its own with tokens and a small body limit). Each asserts what a user
// would check; every wait is a loop or a long poll with a deadline.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import {
  BadRequestError, DelayqClient, NotFoundError, PayloadTooLargeError, UnauthorizedError, signPush, verifyPush,
} from 'delayq';
import { startServer } from './helpers/server.js';
import { signal, uniqueQueue, waitFor, within } from './helpers/wait.js';

let server;
let client;
const workers = [];
before(async () => {
  server = await startServer(['--push-allow', '127.0.0.1']);
  client = new DelayqClient({ baseUrl: server.url });
});
after(async () => {
  // Workers a failed test left running are stopped, or they would keep the process alive.
  await Promise.all(workers.map((w) => w.stop({ grace: 0 })));
  await server?.stop();
});

/** A worker whose log lines and 'error' events are collected rather than printed. */
function quietWorker(source, handler, options = {}) {
  const logs = [];
  const errors = [];
  const w = client.worker(source, handler, { wait: '1s', logger: { error: (line) => logs.push(line) }, ...options });
  w.on('error', (e) => errors.push(e));
  Object.assign(w, { logs, errors });
  workers.push(w);
  return w;
}

const pause = (ms) => new Promise((ok) => setTimeout(ok, ms));

test('S1 send, receive, ack', async () => {
  const q = uniqueQueue('s1');
  const sent = await client.send(q, { order: 1234, items: ['a', 'b'] }, { id: 'close-1234', delay: '200ms' });
  assert.equal(sent.id, 'close-1234');
  assert.equal(sent.duplicate, false);
  const early = await client.receive(q);
  // Nothing before it is due (a machine slow enough to reach this after 200 ms may see it).
  if (Date.now() < sent.due_ms) assert.deepEqual(early, [], 'delivered before it was due');
  const [d] = early.length > 0 ? early : await client.receive(q, { wait: '5s' });
  assert.ok(d, 'the long poll got it once due');
  assert.ok(Date.now() >= sent.due_ms, 'not before it was due');
  assert.equal(d.id, 'close-1234');
  assert.deepEqual(d.payload, { order: 1234, items: ['a', 'b'] });
  assert.equal(d.attempt, 1);
  await client.ack(q, d.receipt);
  const gone = await client.get(q, 'close-1234').catch((e) => e);
  assert.ok(gone instanceof NotFoundError || gone.state === 'completed', String(gone));
  assert.deepEqual(await client.receive(q, { wait: '300ms' }), []);
});

test('S2 retry with backoff', async () => {
  const q = uniqueQueue('s2');
  await client.send(q, { n: 1 }, { id: 'r1', max_attempts: 3, backoff: { fixed: { delay: '200ms' } } });
  const [first] = await client.receive(q, { wait: '2s' });
  assert.equal(first.attempt, 1);
  const nackedAt = Date.now();
  assert.equal((await client.nack(q, first.receipt, { error: 'PaymentError: card declined' })).outcome, 'retry');
  const waiting = await client.get(q, 'r1');
  assert.equal(waiting.state, 'delayed');
  // Due again by the fixed backoff: about 200 ms after the nack (the server's clock is this one's).
  assert.ok(waiting.due_ms >= nackedAt + 190, `due ${waiting.due_ms - nackedAt} ms after the nack`);
  const [second] = await client.receive(q, { wait: '5s' });
  assert.equal(second.id, 'r1');
  assert.equal(second.attempt, 2);
  assert.ok(Date.now() >= waiting.due_ms, 'not redelivered before its backoff passed');
  const history = await client.get(q, 'r1');
  assert.equal(history.errors.length, 1);
  assert.equal(history.errors[0].attempt, 1);
  assert.equal(history.errors[0].error, 'PaymentError: card declined');
  assert.equal(history.last_error, 'PaymentError: card declined');
  await client.ack(q, second.receipt);
});

test('S3 dead letter', async () => {
  const q = uniqueQueue('s3');
  for (const id of ['dl1', 'dl2']) {
    await client.send(q, { id }, { id, max_attempts: 1 });
    const [d] = await client.receive(q, { wait: '2s' });
    assert.equal((await client.nack(q, d.receipt, { error: `bad ${id}` })).outcome, 'dead');
  }
  const page = await waitFor(async () => {
    const p = await client.admin.deadLetters(q);
    return p.total === 2 && p.dead_letters.length === 2 ? p : undefined;
  }, { what: 'two dead letters' });
  assert.deepEqual(page.dead_letters.map((d) => [d.id, d.last_error]), [['dl1', 'bad dl1'], ['dl2', 'bad dl2']]);
  assert.deepEqual(page.dead_letters[0].payload, { id: 'dl1' });
  assert.equal(await client.admin.requeue(q, { id: 'dl1' }), 1);
  const [again] = await client.receive(q, { wait: '2s' });
  assert.equal(again.id, 'dl1');
  assert.equal(again.attempt, 1);
  await client.ack(q, again.receipt);
  assert.equal(await client.admin.purge(q, { id: 'dl2' }), 1);
  await assert.rejects(client.get(q, 'dl2'), NotFoundError);
  assert.equal((await client.admin.deadLetters(q)).total, 0);
});

test('S4 ordered group', async () => {
  const q = uniqueQueue('s4');
  assert.equal((await client.admin.configure(q, { group_concurrency: 1 })).group_concurrency, 1);
  for (let n = 1; n <= 5; n++) await client.send(q, { n }, { group: 'customer:42' });
  const spans = [];
  const w = quietWorker(q, async (d) => {
    const span = { n: d.payload.n, start: performance.now() };
    spans.push(span);
    await pause(30);
    span.end = performance.now();
  }, { concurrency: 4 }).start();
  await waitFor(async () => {
    const s = await client.admin.stats(q);
    return spans.length === 5 && spans.every((s) => s.end) && s.ready + s.in_flight + s.delayed === 0;
  }, { what: 'five messages handled and acked' });
  await w.stop();
  assert.deepEqual(spans.map((s) => s.n), [1, 2, 3, 4, 5], 'in send order');
  for (let i = 1; i < spans.length; i++) {
    assert.ok(spans[i].start >= spans[i - 1].end, `message ${spans[i].n} started before ${spans[i - 1].n} ended`);
  }
  assert.deepEqual(w.errors, []);
});

test('S5 upsert', async () => {
  const q = uniqueQueue('s5');
  const first = await client.send(q, { v: 'old' }, { id: 'u1', delay: '1h' });
  assert.equal(first.duplicate, false);
  const replaced = await client.send(q, { v: 'new' }, { id: 'u1', on_duplicate: 'replace' });
  assert.equal(replaced.replaced, 'delayed');
  const repeat = await client.send(q, { v: 'ignored' }, { id: 'u1' });
  assert.equal(repeat.duplicate, true);
  const [d] = await client.receive(q, { wait: '2s', max: 10 });
  assert.equal(d.id, 'u1');
  assert.deepEqual(d.payload, { v: 'new' });
  await client.ack(q, d.receipt);
  assert.deepEqual(await client.receive(q, { wait: '300ms' }), [], 'one delivery only');
});

test('S6 graceful stop under load', async () => {
  const q = uniqueQueue('s6');
  await client.sendBatch(q, Array.from({ length: 50 }, (_, n) => ({ payload: n })));
  let started = 0;
  let finished = 0;
  let lastEnd = 0;
  const enough = signal();
  const w = quietWorker(q, async () => {
    if (++started === 12) enough.resolve();
    await pause(100);
    finished++;
    lastEnd = Date.now();
  }, { concurrency: 8 }).start();
  await within(enough.promise, 10_000, 'twelve handlers to start');
  await w.stop();
  const stoppedAt = Date.now();
  assert.equal(finished, started, 'every started handler finished');
  assert.ok(stoppedAt - lastEnd < 2_000, `stop returned ${stoppedAt - lastEnd} ms after the last handler ended`);
  // Right after stop(): every finished one acked (gone), the rest ready at once (released,
  // not waiting out a lease), none in flight.
  const s = await client.admin.stats(q);
  assert.equal(s.in_flight, 0);
  assert.equal(s.delayed + s.dead, 0);
  assert.equal(finished + s.ready, 50, `${finished} acked + ${s.ready} ready`);
  assert.ok(started < 50, 'stopped while there was work left');
  assert.deepEqual(w.errors, []);
});

test('S7 push verify', async () => {
  const q = uniqueQueue('s7');
  const got = signal();
  const hook = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c)).on('end', () => {
      got.resolve({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  await new Promise((ok) => hook.listen(0, '127.0.0.1', ok));
  try {
    const target = await client.admin.setPushTarget(q, { url: `http://127.0.0.1:${hook.address().port}/hook`, timeout: '5s' });
    const [key] = target.signing_keys;
    await client.send(q, { order: 7 }, { id: 'push-7' });
    const { headers, body } = await within(got.promise, 10_000, 'the push');
    assert.equal(verifyPush(headers, body, key), true, "the server's own signature verifies");
    assert.equal(verifyPush(headers, Buffer.from('{"order":8}'), key), false, 'a changed body');
    assert.equal(verifyPush({ ...headers, 'delayq-queue': `${q}-other` }, body, key), false, 'another queue');
    assert.equal(verifyPush({ ...headers, 'delayq-message-id': 'push-8' }, body, key), false, 'another id');
    assert.equal(verifyPush({ ...headers, 'delayq-attempt': '2' }, body, key), false, 'another attempt');
    assert.equal(verifyPush(headers, body, 'another-key-0123456789'), false, 'another key');
    const t = Number(/t=(\d+)/.exec(headers['delayq-signature'])[1]);
    const old = { ...headers, 'delayq-signature': signPush(key, t - 301, { queue: q, id: 'push-7', attempt: 1, body }) };
    assert.equal(verifyPush(old, body, key), false, 'a t more than 5 minutes old');
    assert.equal(verifyPush(headers, body, key, { nowSeconds: t + 301 }), false, 'checked more than 5 minutes later');
  } finally {
    await client.admin.deletePushTarget(q).catch(() => {});
    hook.close();
    hook.closeAllConnections();
  }
});

test('S8 bad input errors', async () => {
  const token = 'admin-token-0123456789';
  const strict = await startServer(['--tokens', `admin:${token}`, '--max-body-bytes', '4096']);
  try {
    const c = new DelayqClient({ baseUrl: strict.url, token });
    const q = uniqueQueue('s8');
    const typed = (code, Class) => (e) => e instanceof Class && e.code === code;
    await assert.rejects(c.send('no spaces!', 1), typed('invalid_queue_name', BadRequestError));
    await assert.rejects(c.send(q, 1, { id: 'has space' }), typed('invalid_id', BadRequestError));
    await assert.rejects(c.send(q, 'x'.repeat(8192)), (e) => e instanceof PayloadTooLargeError && ['payload_too_large', 'body_too_large'].includes(e.code));
    // Refused by the client itself, before any request, naming the fix.
    let requests = 0;
    const counting = new DelayqClient({ baseUrl: strict.url, token, fetch: (u, i) => (requests++, fetch(u, i)) });
    await assert.rejects(counting.send(q, 1, { delay: 2 }), (e) => e instanceof TypeError && /give a duration string with its unit, such as '2s' or '2ms'/.test(e.message));
    assert.equal(requests, 0);
    const unknown = await c.ack(q, 'not-a-receipt').catch((e) => e);
    assert.ok(['invalid_receipt', 'lease_lost'].includes(unknown.code), String(unknown));
    const wrong = new DelayqClient({ baseUrl: strict.url, token: 'wrong-token-0123456789' });
    await assert.rejects(wrong.send(q, 1), typed('unauthorized', UnauthorizedError));
  } finally {
    await strict.stop();
  }
});

class OrderError extends Error {
  constructor(message) {
    super(message);
    this.name = 'OrderError';
  }
}

test('S9 a handler that fails is loud', async () => {
  const q = uniqueQueue('s9');
  const failed = [];
  const w = quietWorker(q, (d) => {
    throw new OrderError(d.payload.long ? `order ${d.id}: ${'x'.repeat(1000)}${'ü'.repeat(2000)}` : `order ${d.id} cannot be closed`);
  });
  w.on('failed', (delivery, error) => failed.push({ delivery, error }));
  w.start();
  await client.send(q, { long: false }, { id: 'o7', max_attempts: 5, backoff: { fixed: { delay: '1h' } } });
  await waitFor(() => failed.length === 1, { what: "the 'failed' event" });
  // The event: the delivery and the error thrown.
  assert.equal(failed[0].delivery.id, 'o7');
  assert.ok(failed[0].error instanceof OrderError);
  assert.equal(failed[0].error.message, 'order o7 cannot be closed');
  // The log: the type, the message and the stack.
  assert.equal(w.logs.length, 1);
  assert.match(w.logs[0], /message o7 .*failed: OrderError: order o7 cannot be closed\n\s+at /);
  // The server's error history: the same text, first line `OrderError: <message>`, then the stack.
  const info = await waitFor(async () => {
    const m = await client.get(q, 'o7');
    return m.last_error ? m : undefined;
  }, { what: 'the nack' });
  const [head, ...frames] = info.last_error.split('\n');
  assert.equal(head, 'OrderError: order o7 cannot be closed');
  assert.ok(frames.length > 0 && frames.every((f) => /^\s+at /.test(f)), info.last_error);
  assert.ok(frames.some((f) => f.includes('scenarios.test.js')), 'the stack names where it was thrown');
  // An error text over 4 KiB is cut to 4 KiB, still valid UTF-8, and kept whole by the server.
  await client.send(q, { long: true }, { id: 'o8', max_attempts: 5, backoff: { fixed: { delay: '1h' } } });
  await waitFor(() => failed.length === 2, { what: "the second 'failed' event" });
  const long = await waitFor(async () => {
    const m = await client.get(q, 'o8');
    return m.last_error ? m : undefined;
  }, { what: 'the long nack' });
  const bytes = Buffer.byteLength(long.last_error);
  assert.ok(long.last_error.startsWith('OrderError: order o8: xxx'));
  assert.ok(!long.last_error.includes('\uFFFD'), 'cut on a character boundary');
  assert.ok(bytes <= 4096, `${bytes} bytes kept`);
  assert.ok(bytes >= 4095, `the server kept ${bytes} bytes of the 4 KiB sent`);
  await w.stop();
  assert.deepEqual(w.errors, []);
});
