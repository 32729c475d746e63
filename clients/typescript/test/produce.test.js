// Producer and consumer calls against a real server: send -> receive -> ack, every send
// option the API takes, batches, bytes payloads, get, cancel, reschedule, list.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DelayqClient, NotFoundError, WrongStateError } from 'delayq';
import { startServer } from './helpers/server.js';
import { uniqueQueue, waitFor } from './helpers/wait.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new DelayqClient({ baseUrl: server.url });
});
after(() => server?.stop());

test('send -> receive -> ack', async () => {
  const q = uniqueQueue('orders');
  const sent = await client.send(q, { order: 1234 }, { id: 'close-1234' });
  assert.equal(sent.id, 'close-1234');
  assert.equal(sent.duplicate, false);
  const [d] = await client.receive(q, { max: 10, wait: '2s', lease: '30s' });
  assert.equal(d.id, 'close-1234');
  assert.deepEqual(d.payload, { order: 1234 });
  assert.equal(d.attempt, 1);
  assert.equal(d.queue, q);
  assert.equal(await client.ack(q, d.receipt), undefined);
  await assert.rejects(client.get(q, 'close-1234'), NotFoundError);
  const stats = await client.admin.stats(q);
  assert.equal(stats.in_flight + stats.ready + stats.delayed, 0);
});

test('ackAndReceive acks what was finished and receives the next, in one request', async () => {
  const q = uniqueQueue('carried');
  for (const n of [1, 2, 3]) await client.send(q, { n });
  const first = await client.receive(q, { max: 2 });
  assert.equal(first.length, 2);
  await client.ack(q, first[1].receipt);
  const { acked, deliveries } = await client.ackAndReceive(q, first.map((d) => d.receipt), { max: 5, wait: '1s' });
  assert.deepEqual(acked.map((a) => a.ok), [true, false], 'the second was acked already');
  assert.equal(acked[0].receipt, first[0].receipt);
  assert.deepEqual(deliveries.map((d) => d.payload), [{ n: 3 }]);
  const last = await client.ackAndReceive(q, [deliveries[0].receipt]);
  assert.deepEqual(last, { acked: [{ receipt: deliveries[0].receipt, ok: true }], deliveries: [] });
  const stats = await client.admin.stats(q);
  assert.equal(stats.in_flight + stats.ready + stats.delayed, 0);
});

test('a delayed message is not delivered before it is due, then is', async () => {
  const q = uniqueQueue('delayed');
  const sent = await client.send(q, 'later', { delay: '1500ms' });
  assert.equal((await client.get(q, sent.id)).state, 'delayed');
  assert.deepEqual(await client.receive(q), []);
  const started = Date.now();
  const [d] = await waitFor(() => client.receive(q, { wait: '5s' }).then((ds) => ds.length && ds), { what: 'delayed delivery' });
  assert.ok(d.due_ms >= sent.due_ms);
  assert.ok(Date.now() - started < 5000);
  await client.ack(q, d.receipt);
});

test('every send option is accepted and shows in get and the delivery', async () => {
  const q = uniqueQueue('options');
  const at = new Date(Date.now() + 60_000);
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const sent = await client.send(q, { full: true }, {
    deliver_at: at, id: 'opt-1', priority: 9, max_attempts: 7,
    backoff: { exponential: { base: '1s', cap: '10m', factor: 3, jitter_percent: 10 } },
    ttl: '1h', group: 'tenant-7', handler_timeout: '90s', traceparent,
  });
  assert.equal(sent.due_ms, at.getTime());
  const info = await client.get(q, 'opt-1');
  assert.equal(info.state, 'delayed');
  assert.equal(info.priority, 9);
  assert.equal(info.max_attempts, 7);
  assert.equal(info.group, 'tenant-7');
  assert.equal(info.traceparent, traceparent);
  assert.ok(info.expires_at_ms >= at.getTime() + 3_600_000);
  // The other backoff shapes and expires_at are accepted too.
  for (const backoff of [
    { fixed: { delay: '30s' } }, { linear: { base: '30s', cap: '10m' } }, { list: { delays: ['30s', '2s'] } },
  ]) {
    await client.send(q, 1, { backoff, expires_at: new Date(Date.now() + 7_200_000), delay: '1h' });
  }
  // A duplicate caller id is not an error; replace and debounce rewrite the message.
  const dup = await client.send(q, { full: false }, { id: 'opt-1' });
  assert.equal(dup.duplicate, true);
  const replaced = await client.send(q, { full: 'replaced' }, { id: 'opt-1', on_duplicate: 'replace', if_in_flight: 'refuse', delay: '1h' });
  assert.equal(replaced.replaced, 'delayed');
  const debounced = await client.send(q, 2, { id: 'opt-1', on_duplicate: 'debounce', max_wait: '5m', delay: '10s' });
  assert.equal(debounced.replaced, 'delayed');
  // Now and with handler_timeout: the delivery carries it.
  await client.send(q, 'now', { id: 'opt-2', handler_timeout: '1500ms', traceparent });
  const [d] = await client.receive(q, { wait: '2s' });
  assert.equal(d.id, 'opt-2');
  assert.equal(d.handler_timeout_ms, 1500);
  assert.equal(d.traceparent, traceparent);
  await client.ack(q, d.receipt);
});

test('bytes payloads travel as bytes and come back as bytes', async () => {
  const q = uniqueQueue('bytes');
  const bytes = new Uint8Array([0, 1, 2, 250, 255]);
  await client.send(q, bytes, { id: 'bin/1:a@b' });
  const info = await client.get(q, 'bin/1:a@b');
  assert.ok(info.payload instanceof Uint8Array, 'bytes in payload');
  assert.deepEqual(new Uint8Array(info.payload), bytes);
  assert.equal(info.payload_base64, Buffer.from(bytes).toString('base64'));
  const [d] = await client.receive(q);
  assert.equal(d.id, 'bin/1:a@b');
  assert.deepEqual(new Uint8Array(d.payload), bytes);
  assert.equal(d.payload_base64, Buffer.from(bytes).toString('base64'));
  await client.ack(q, [d.receipt]).then((r) => assert.deepEqual(r.map((x) => x.ok), [true]));
});

test('sendBatch is all or nothing; receive many and ack a list', async () => {
  const q = uniqueQueue('batch');
  const results = await client.sendBatch(q, [
    { payload: { n: 1 }, id: 'b1' }, { payload: { n: 2 }, priority: 9 }, { payload: new Uint8Array([7]) },
  ]);
  assert.equal(results.length, 3);
  assert.equal(results[0].id, 'b1');
  await assert.rejects(client.sendBatch(q, [{ payload: 1 }, { payload: 2, priority: 42 }]), (e) => e.status === 400 && e.code === 'invalid_option');
  const ds = await client.receive(q, { max: 10 });
  assert.equal(ds.length, 3);
  assert.deepEqual(ds[0].payload, { n: 2 }); // highest priority first
  const acked = await client.ack(q, ds.map((d) => d.receipt));
  assert.ok(acked.every((r) => r.ok));
});

test('cancel, reschedule and list by state', async () => {
  const q = uniqueQueue('cancel');
  await client.send(q, 'a', { id: 'c1', delay: '1h' });
  await client.send(q, 'b', { id: 'c2', delay: '1h' });
  const page = await client.listMessages(q, { state: 'delayed', limit: 1 });
  assert.equal(page.messages.length, 1);
  assert.ok(page.next);
  const rest = await client.listMessages(q, { state: 'delayed', cursor: page.next });
  assert.equal(rest.messages.length, 1);
  assert.equal(rest.next, null);
  const moved = await client.reschedule(q, 'c2', { delay: 0 });
  assert.equal(moved.id, 'c2');
  const at = Date.now() + 120_000;
  assert.equal((await client.reschedule(q, 'c1', { deliver_at: new Date(at) })).due_ms, at);
  assert.deepEqual(await client.cancel(q, 'c1'), { cancelled: true, state: 'delayed' });
  await assert.rejects(client.cancel(q, 'c1'), NotFoundError);
  const [d] = await client.receive(q, { wait: '2s' });
  assert.equal(d.id, 'c2');
  await assert.rejects(client.cancel(q, 'c2'), (e) => e instanceof WrongStateError && e.status === 409);
  await client.ack(q, d.receipt);
});

test('cancelMany says what became of each id', async () => {
  const q = uniqueQueue('cancelmany');
  await client.send(q, 'a', { id: 'm1', delay: '1h' });
  await client.send(q, 'b', { id: 'm2' });
  const [held] = await client.receive(q, { wait: '2s' });
  assert.equal(held.id, 'm2');
  const done = await client.cancelMany(q, ['m1', 'nope', 'm2']);
  assert.deepEqual(done, {
    cancelled: 1,
    results: [
      { id: 'm1', outcome: 'cancelled', state: 'delayed' },
      { id: 'nope', outcome: 'not_found' },
      { id: 'm2', outcome: 'not_cancelled', state: 'in_flight' },
    ],
  });
  await client.ack(q, held.receipt);
});

test('receiveMany serves queues in strict order', async () => {
  const low = uniqueQueue('low');
  const high = uniqueQueue('high');
  await client.send(low, 'low');
  await client.send(high, 'high');
  const [first] = await client.receiveMany({ queues: [high, low], wait: '1s' });
  assert.equal(first.queue, high);
  await client.ack(first.queue, first.receipt);
  const [second] = await client.receiveMany({ queues: [high, low], wait: '1s' });
  assert.equal(second.queue, low);
  await client.release(second.queue, second.receipt);
});
