// Typed errors from real answers: a bad queue name is a 400 with its code, an unknown id a
// NotFoundError, a settled or expired receipt a LeaseLostError; client-side timeouts and
// connection failures are DelayqErrors with status 0.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  BadRequestError, ConnectionError, DelayqClient, DelayqError, LeaseLostError, NotFoundError,
  TimeoutError,
} from 'delayq';
import { freePort, startServer } from './helpers/server.js';
import { uniqueQueue } from './helpers/wait.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new DelayqClient({ baseUrl: server.url });
});
after(() => server?.stop());

test('a bad queue name is a BadRequestError with code invalid_queue_name', async () => {
  const error = await client.send('no spaces!', 1).catch((e) => e);
  assert.ok(error instanceof BadRequestError, String(error));
  assert.ok(error instanceof DelayqError);
  assert.equal(error.status, 400);
  assert.equal(error.code, 'invalid_queue_name');
  assert.match(error.message, /queue/);
});

test('bad input names its code: invalid_id, invalid_duration, invalid_schedule, invalid_receipt', async () => {
  const q = uniqueQueue('bad');
  await assert.rejects(client.send(q, 1, { id: 'has space' }), { status: 400, code: 'invalid_id' });
  // The client refuses a duration it cannot read before sending; the server's own check is
  // reached with raw().
  await assert.rejects(client.send(q, 1, { delay: 'soon' }), TypeError);
  await assert.rejects(client.raw('POST', `/v1/queues/${q}/messages`, { payload: 1, delay: 'soon' }), { status: 400, code: 'invalid_duration' });
  await assert.rejects(client.send(q, 1, { delay: '1ms', deliver_at: new Date() }), { status: 400, code: 'invalid_schedule' });
  await assert.rejects(client.ack(q, 'not-a-receipt'), { status: 400, code: 'invalid_receipt' });
  await assert.rejects(client.receive(q, { wait: '1h' }), { status: 400, code: 'over_limit' });
});

test('an unknown id is a NotFoundError', async () => {
  const q = uniqueQueue('missing');
  const error = await client.get(q, 'nobody').catch((e) => e);
  assert.ok(error instanceof NotFoundError, String(error));
  assert.equal(error.status, 404);
  assert.equal(error.code, 'not_found');
  await assert.rejects(client.admin.requeue(q, { id: 'nobody' }), NotFoundError);
  await assert.rejects(client.admin.getPushTarget(q), NotFoundError);
});

test('a lost lease is a LeaseLostError (409 lease_lost)', async () => {
  const q = uniqueQueue('lease');
  await client.send(q, 'x', { id: 'l1' });
  const [d] = await client.receive(q, { lease: '200ms' });
  // Its lease passes and another consumer takes the message.
  const [again] = await client.receive(q, { wait: '3s' });
  assert.equal(again.id, 'l1');
  for (const call of [
    () => client.ack(q, d.receipt),
    () => client.nack(q, d.receipt, { error: 'late' }),
    () => client.extend(q, d.receipt, { lease: '10s' }),
    () => client.release(q, d.receipt),
  ]) {
    const error = await call().catch((e) => e);
    assert.ok(error instanceof LeaseLostError, String(error));
    assert.equal(error.status, 409);
    assert.equal(error.code, 'lease_lost');
  }
  // In a list, a lost lease is a result, not an error.
  const [result] = await client.ack(q, [d.receipt, again.receipt]);
  assert.equal(result.ok, false);
  const deadline = await client.extend(q, again.receipt, { lease: '5s' }).catch((e) => e);
  assert.ok(deadline instanceof LeaseLostError, 'acked above in the list');
});

test('a call past its timeout is a TimeoutError; an unreachable server a ConnectionError', async () => {
  const q = uniqueQueue('slow');
  // A long-poll's wait is added to its timeout: this one answers, empty.
  assert.deepEqual(await client.receive(q, { wait: '600ms' }, { timeoutMs: 500 }), []);
  // A raw call that waits longer than its timeout allows.
  const error = await client.raw('POST', `/v1/queues/${q}/receive`, { wait: 2000 }, { timeoutMs: 100 }).catch((e) => e);
  assert.ok(error instanceof TimeoutError, String(error));
  assert.equal(error.status, 0);
  assert.equal(error.code, 'timeout');
  const nobody = new DelayqClient({ baseUrl: `http://127.0.0.1:${await freePort()}`, retries: 1, retryBaseMs: 1 });
  const refused = await nobody.get(q, 'x').catch((e) => e);
  assert.ok(refused instanceof ConnectionError, String(refused));
  assert.equal(refused.code, 'connection_failed');
});

