// Admin calls against a real server: stats and the queue list, create and configure, pause
// and resume, dead letters (list, requeue, purge one and all), and the probes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequestError, ConflictError, DelayqClient, NotFoundError } from 'delayq';
import { startServer } from './helpers/server.js';
import { uniqueQueue, waitFor } from './helpers/wait.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new DelayqClient({ baseUrl: server.url });
});
after(() => server?.stop());

test('probes: health and ready', async () => {
  assert.deepEqual(await client.health(), { status: 'ok' });
  const ready = await client.ready();
  assert.equal(ready.status, 'ready');
  // The server the test suite runs on, as it names itself.
  assert.ok(['redis', 'valkey'].includes(ready.server.kind), JSON.stringify(ready));
  assert.match(ready.server.version, /^\d+\.\d+\.\d+$/);
});

test('stats count each state; the queue list includes the queue', async () => {
  const q = uniqueQueue('stats');
  await client.send(q, 1, { delay: '1h' });
  await client.send(q, 2);
  await client.send(q, 3);
  await client.receive(q);
  const s = await client.admin.stats(q);
  assert.equal(s.name, q);
  assert.deepEqual([s.delayed, s.ready, s.in_flight, s.dead], [1, 1, 1, 0]);
  const all = await client.admin.queues();
  assert.ok(all.some((x) => x.name === q && x.delayed === 1));
});

test('createQueue and configure', async () => {
  const q = uniqueQueue('create');
  assert.equal((await client.admin.createQueue(q, { partitions: 3 })).partitions, 3);
  assert.equal((await client.admin.createQueue(q, { partitions: 3 })).partitions, 3, 'the same count again is fine');
  await assert.rejects(client.admin.createQueue(q, { partitions: 4 }), BadRequestError);
  const s = await client.admin.configure(q, {
    idempotency_window: '1h', rate_limit: { per_second: 100, burst: 10 }, max_delay: '30d', on_expire: 'drop',
  });
  assert.equal(s.idempotency_window_ms, 3_600_000);
  assert.deepEqual(s.rate_limit, { per_second: 100, burst: 10 });
  assert.equal(s.max_delay_ms, 30 * 86_400_000);
  assert.equal(s.on_expire, 'drop');
  assert.equal((await client.admin.configure(q, { rate_limit: null })).rate_limit, null);
});

test('deleteQueue refuses a queue with messages unless forced', async () => {
  const q = uniqueQueue('delete');
  await client.send(q, 1, { delay: '1h' });
  const refused = await client.admin.deleteQueue(q).catch((e) => e);
  assert.ok(refused instanceof ConflictError, String(refused));
  assert.equal(refused.code, 'queue_not_empty');
  const deleted = await client.admin.deleteQueue(q, { force: true });
  assert.equal(deleted.queue, q);
  assert.equal(deleted.messages, 1);
  assert.ok(!(await client.admin.queues()).some((x) => x.name === q));
  await assert.rejects(client.admin.deleteQueue(q), NotFoundError);
});

test('pause stops deliveries; resume starts them again', async () => {
  const q = uniqueQueue('pause');
  assert.equal((await client.admin.pause(q)).paused, true);
  await client.send(q, 'held');
  assert.deepEqual(await client.receive(q, { wait: '200ms' }), []);
  assert.equal((await client.admin.resume(q)).paused, false);
  const [d] = await client.receive(q, { wait: '2s' });
  assert.equal(d.payload, 'held');
  await client.ack(q, d.receipt);
});

test('dead letters: list, requeue, purge one and all', async () => {
  const q = uniqueQueue('dead');
  for (const id of ['d1', 'd2', 'd3']) {
    await client.send(q, { id }, { id });
    const [d] = await client.receive(q);
    assert.equal((await client.nack(q, d.receipt, { error: `bad ${id}`, dead: true })).outcome, 'dead');
  }
  const page = await client.admin.deadLetters(q, { offset: 1, limit: 1 });
  assert.equal(page.total, 3);
  assert.equal(page.dead_letters.length, 1);
  assert.equal(page.dead_letters[0].id, 'd2');
  assert.equal(page.dead_letters[0].last_error, 'bad d2');
  assert.deepEqual(page.dead_letters[0].payload, { id: 'd2' });
  assert.equal(await client.admin.requeue(q, { id: 'd1' }), 1);
  assert.equal((await client.get(q, 'd1')).state, 'ready');
  assert.equal(await client.admin.purge(q, { id: 'd2' }), 1);
  await assert.rejects(client.admin.purge(q, { id: 'd2' }), NotFoundError);
  assert.equal(await client.admin.purge(q, { all: true }), 1);
  await waitFor(async () => (await client.admin.deadLetters(q)).total === 0, { what: 'an empty dead-letter list' });
  // A nack with a new payload and fewer attempts, in one step.
  const [d] = await client.receive(q);
  assert.equal((await client.nack(q, d.receipt, { payload: { id: 'd1', fixed: true }, retry_after: 0 })).outcome, 'retry');
  const [again] = await client.receive(q, { wait: '2s' });
  assert.deepEqual(again.payload, { id: 'd1', fixed: true });
  await client.ack(q, again.receipt);
});
