// Schedules (put, get, list, pause, resume, backfill, delete), groups (list, get, set,
// pause, resume) and every queue setting of PATCH /v1/queues/{queue}, against a real server.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DelayqClient, NotFoundError } from 'delayq';
import { startServer } from './helpers/server.js';
import { uniqueQueue, waitFor } from './helpers/wait.js';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new DelayqClient({ baseUrl: server.url });
});
after(() => server?.stop());

test('schedules: put, get, list, pause, resume, delete', async () => {
  const q = uniqueQueue('sched');
  const put = await client.schedules.put(q, 'daily-sales', {
    cron: '0 30 9 * * MON-FRI', time_zone: 'Europe/Berlin', missed: 'once',
    payload: { report: 'sales' }, priority: 7, max_attempts: 4, backoff: { fixed: { delay: '1m' } },
    handler_timeout: '90s', jitter: '5m', overlap: 'skip',
  });
  assert.equal(put.name, 'daily-sales');
  assert.equal(put.cron, '0 30 9 * * MON-FRI');
  assert.equal(put.time_zone, 'Europe/Berlin');
  assert.equal(put.missed, 'once');
  assert.deepEqual(put.payload, { report: 'sales' });
  assert.equal(put.priority, 7);
  assert.equal(put.max_attempts, 4);
  assert.equal(put.handler_timeout_ms, 90_000);
  assert.equal(put.jitter_ms, 300_000);
  assert.equal(put.overlap, 'skip');
  assert.equal(put.next_ticks_ms.length, 5);
  assert.equal(put.paused, false);

  const every = await client.schedules.put(q, 'cleanup', { every: '10m', payload: new Uint8Array([1, 2, 3]) });
  assert.equal(every.every_ms, 600_000);
  assert.deepEqual(new Uint8Array(every.payload), new Uint8Array([1, 2, 3]), 'bytes come back as bytes');
  assert.ok(every.next_ticks_ms.every((t) => t % 600_000 === 0), 'on the 10-minute grid');

  assert.deepEqual((await client.schedules.list(q)).map((s) => s.name).sort(), ['cleanup', 'daily-sales']);
  assert.equal((await client.schedules.get(q, 'cleanup')).every_ms, 600_000);
  assert.equal((await client.schedules.pause(q, 'cleanup')).paused, true);
  assert.equal((await client.schedules.get(q, 'cleanup')).paused, true);
  assert.equal((await client.schedules.resume(q, 'cleanup')).paused, false);
  await client.schedules.delete(q, 'cleanup');
  await assert.rejects(client.schedules.get(q, 'cleanup'), NotFoundError);
  await assert.rejects(client.schedules.delete(q, 'cleanup'), NotFoundError);
  await assert.rejects(client.schedules.put(q, 'bad', { cron: 'not cron', payload: 1 }), { code: 'invalid_schedule' });
});

test('a schedule fires ticks as messages, and backfill sends the ticks never sent', async () => {
  const q = uniqueQueue('ticks');
  await client.schedules.put(q, 'each-second', { every: '1s', payload: { tick: true } });
  // The scheduler of this server sends each tick a second ahead: one arrives.
  const [d] = await waitFor(() => client.receive(q, { wait: '3s' }).then((ds) => ds.length && ds), { what: 'a tick' });
  assert.match(d.id, /^sched:each-second:\d+$/);
  assert.deepEqual(d.payload, { tick: true });
  await client.ack(q, d.receipt);
  // Paused, it sends nothing; backfill sends the ticks of a past range that were never sent.
  const paused = await client.schedules.pause(q, 'each-second');
  const from = new Date(paused.created_ms + 100);
  const to = new Date(Math.max(Date.now(), paused.created_ms + 2_500));
  await waitFor(() => Date.now() > to.getTime(), { what: 'the range to pass', timeoutMs: 10_000 });
  const first = await client.schedules.backfill(q, 'each-second', { from, to: to.toISOString() });
  assert.ok(first.sent + first.already_sent >= 2, JSON.stringify(first));
  const again = await client.schedules.backfill(q, 'each-second', { from, to });
  assert.deepEqual(again, { sent: 0, already_sent: first.sent + first.already_sent }, 'a repeat sends nothing more');
  await client.schedules.delete(q, 'each-second');
  await client.admin.deleteQueue(q, { force: true });
});

test('groups: list, get, and set a group\'s own concurrency, weight, rate limit and pause', async () => {
  const q = uniqueQueue('groups');
  for (let n = 0; n < 3; n++) await client.send(q, { n }, { group: 'tenant:acme' });
  await client.send(q, { n: 9 }, { group: 'tenant:globex', delay: '1h' });
  const page = await client.groups.list(q);
  assert.equal(page.total, 2);
  assert.deepEqual(page.groups, [{ name: 'tenant:acme', messages: 3 }, { name: 'tenant:globex', messages: 1 }]);
  assert.deepEqual((await client.groups.list(q, { offset: 1, limit: 1 })).groups, [{ name: 'tenant:globex', messages: 1 }]);
  const acme = await client.groups.get(q, 'tenant:acme');
  assert.deepEqual([acme.ready, acme.delayed, acme.in_flight, acme.paused, acme.weight], [3, 0, 0, false, 1]);
  assert.equal(acme.concurrency, null);

  const set = await client.groups.set(q, 'tenant:acme', { concurrency: 2, weight: 3, rate_limit: { per_second: 5, burst: 2 } });
  assert.equal(set.own_concurrency, 2);
  assert.equal(set.concurrency, 2);
  assert.equal(set.weight, 3);
  assert.deepEqual(set.own_rate_limit, { per_second: 5, burst: 2 });
  // Paused, the group gives nothing; the rest of the queue would flow.
  assert.equal((await client.groups.pause(q, 'tenant:acme')).paused, true);
  assert.deepEqual(await client.receive(q, { wait: '200ms' }), []);
  assert.equal((await client.groups.resume(q, 'tenant:acme')).paused, false);
  const ds = await client.receive(q, { max: 10, wait: '2s' });
  assert.ok(ds.length >= 1 && ds.length <= 2, `${ds.length} delivered under a concurrency of 2`);
  assert.ok(ds.every((d) => d.group === 'tenant:acme'));
  await client.ack(q, ds.map((d) => d.receipt));
  // null gives the group the queue's settings again.
  const reset = await client.groups.set(q, 'tenant:acme', { concurrency: null, weight: null, rate_limit: null });
  assert.deepEqual([reset.own_concurrency, reset.weight, reset.own_rate_limit], [null, 1, null]);
});

test('configure takes every setting of PATCH /v1/queues/{queue}', async () => {
  const q = uniqueQueue('settings');
  const s = await client.admin.configure(q, {
    idempotency_window: '2h', rate_limit: { per_second: 100, burst: 10 }, group_concurrency: 3,
    group_rate_limit: { per_second: 10, burst: 5 }, default_ttl: '5m', on_expire: 'drop', max_delay: '30d',
    retain_completed: { keep_for: '7d', max: 1000 }, events: { max: 50_000 },
  });
  assert.equal(s.idempotency_window_ms, 7_200_000);
  assert.deepEqual(s.rate_limit, { per_second: 100, burst: 10 });
  assert.equal(s.group_concurrency, 3);
  assert.deepEqual(s.group_rate_limit, { per_second: 10, burst: 5 });
  assert.equal(s.default_ttl_ms, 300_000);
  assert.equal(s.on_expire, 'drop');
  assert.equal(s.max_delay_ms, 30 * 86_400_000);
  assert.deepEqual(s.retain_completed, { keep_for_ms: 7 * 86_400_000, max: 1000 });
  assert.equal(s.events_max, 50_000);
  // A completed message is kept while retention is on.
  await client.send(q, 1, { id: 'kept' });
  const [d] = await client.receive(q);
  await client.ack(q, d.receipt);
  assert.equal((await client.get(q, 'kept')).state, 'completed');
  // null lifts each limit and stops each feature.
  const lifted = await client.admin.configure(q, {
    rate_limit: null, group_concurrency: null, group_rate_limit: null, default_ttl: null, max_delay: null,
    retain_completed: null, events: null, idempotency_window: 0, on_expire: 'dead_letter',
  });
  assert.deepEqual(
    [lifted.rate_limit, lifted.group_concurrency, lifted.group_rate_limit, lifted.default_ttl_ms, lifted.max_delay_ms,
      lifted.retain_completed, lifted.events_max, lifted.idempotency_window_ms, lifted.on_expire],
    [null, null, null, null, null, null, null, 0, 'dead_letter'],
  );
});
