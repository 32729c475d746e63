// The duration rule (README, "Durations and times"): a duration is text with its unit, a
// bare number is refused before any request with a TypeError that names the fix (0 alone
// is taken), and a time is a Date or RFC 3339 text. Checked for every option that takes
// one, and against a real server: what reaches it is the right number of milliseconds.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DelayqClient, RetryLaterError, durationMs, timeValue } from 'delayq';
import { startServer } from './helpers/server.js';
import { uniqueQueue } from './helpers/wait.js';

let server;
let client;
/** Every request body the client sends, by `METHOD path`. */
const sent = [];
before(async () => {
  server = await startServer();
  const recording = (url, init) => {
    sent.push({ request: `${init.method} ${new URL(url).pathname}`, body: init.body ? JSON.parse(init.body) : undefined });
    return fetch(url, init);
  };
  client = new DelayqClient({ baseUrl: server.url, fetch: recording });
});
after(() => server?.stop());

test('duration strings are read as whole milliseconds', () => {
  const cases = {
    '250ms': 250, '2s': 2_000, '1m30s': 90_000, '15m': 900_000, '1h 30m': 5_400_000, '1d': 86_400_000,
    '10 s': 10_000, ' 5ms ': 5, '1h1m1s1ms': 3_661_001, '0s': 0, '0': 0,
  };
  for (const [text, ms] of Object.entries(cases)) assert.equal(durationMs(text), ms, text);
  assert.equal(durationMs(0), 0, 'a bare 0 is the same in every unit');
});

test('a bare number is refused with a TypeError that names the fix', () => {
  for (const n of [2, 1500, 0.5, -1]) {
    assert.throws(() => durationMs(n, 'delay'), (e) => {
      assert.ok(e instanceof TypeError);
      assert.match(e.message, /^delay: a bare number/);
      assert.match(e.message, new RegExp(`give a duration string with its unit, such as '${n}s' or '${n}ms'`));
      return true;
    });
  }
});

test('text that is not a duration is refused, naming the units', () => {
  for (const bad of ['', '2', '1.5s', '2 sec', '5min', 'soon', '1h30', 's', '-2s', '2s2']) {
    assert.throws(() => durationMs(bad, 'wait'), /wait: .* is not a duration; give whole numbers with units ms, s, m, h or d/, JSON.stringify(bad));
  }
  for (const bad of [null, true, {}, ['2s']]) assert.throws(() => durationMs(bad, 'lease'), /lease: give a duration string/);
});

test('times are a Date or RFC 3339 text; a bare number is refused', () => {
  assert.equal(timeValue(new Date(1_800_000_000_000)), 1_800_000_000_000);
  for (const ok of ['2030-01-01T09:00:00Z', '2030-01-01T10:00:00.5+05:45', '2030-01-01 09:00:00z']) assert.equal(timeValue(ok), ok);
  assert.throws(() => timeValue(1_800_000_000_000, 'deliver_at'), /deliver_at: a bare number .* give a Date, such as new Date\(1800000000000\)/);
  for (const bad of ['tomorrow', '2030-01-01', new Date(NaN)]) assert.throws(() => timeValue(bad, 'expires_at'), TypeError);
});

test('every option that takes a duration or a time refuses a bare number before any request', async () => {
  const q = uniqueQueue('refused');
  const calls = {
    'send delay': () => client.send(q, 1, { delay: 2 }),
    'send ttl': () => client.send(q, 1, { ttl: 60 }),
    'send max_wait': () => client.send(q, 1, { id: 'x', on_duplicate: 'debounce', max_wait: 5 }),
    'send handler_timeout': () => client.send(q, 1, { handler_timeout: 90 }),
    'send replicas.timeout': () => client.send(q, 1, { replicas: { count: 1, timeout: 1 } }),
    'send backoff fixed': () => client.send(q, 1, { backoff: { fixed: { delay: 30 } } }),
    'send backoff exponential': () => client.send(q, 1, { backoff: { exponential: { base: 1, cap: '10m' } } }),
    'send backoff linear': () => client.send(q, 1, { backoff: { linear: { base: '1s', cap: 600 } } }),
    'send backoff list': () => client.send(q, 1, { backoff: { list: { delays: ['1s', 2] } } }),
    'send deliver_at': () => client.send(q, 1, { deliver_at: Date.now() + 1000 }),
    'send expires_at': () => client.send(q, 1, { expires_at: Date.now() + 1000 }),
    'sendBatch delay': () => client.sendBatch(q, [{ payload: 1, delay: 2 }]),
    'receive lease': () => client.receive(q, { lease: 30 }),
    'receive wait': () => client.receive(q, { wait: 2 }),
    'ackAndReceive wait': () => client.ackAndReceive(q, [], { wait: 2 }),
    'receiveMany wait': () => client.receiveMany({ queues: [q], wait: 2 }),
    'extend lease': () => client.extend(q, 'r', { lease: 30 }),
    'nack retry_after': () => client.nack(q, 'r', { retry_after: 30 }),
    'reschedule delay': () => client.reschedule(q, 'x', { delay: 2 }),
    'reschedule deliver_at': () => client.reschedule(q, 'x', { deliver_at: Date.now() }),
    'configure idempotency_window': () => client.admin.configure(q, { idempotency_window: 3600 }),
    'configure default_ttl': () => client.admin.configure(q, { default_ttl: 300 }),
    'configure max_delay': () => client.admin.configure(q, { max_delay: 30 }),
    'configure retain_completed.keep_for': () => client.admin.configure(q, { retain_completed: { keep_for: 7, max: 10 } }),
    'setPushTarget timeout': () => client.admin.setPushTarget(q, { url: 'https://example.com/hook', timeout: 10 }),
    'schedule every': () => client.schedules.put(q, 's', { every: 600, payload: 1 }),
    'schedule jitter': () => client.schedules.put(q, 's', { every: '10m', jitter: 5, payload: 1 }),
    'schedule handler_timeout': () => client.schedules.put(q, 's', { every: '10m', handler_timeout: 90, payload: 1 }),
    'schedule backfill from': () => client.schedules.backfill(q, 's', { from: 0, to: new Date() }),
    'events wait': () => client.events.page(q, { wait: 5 }),
    'events follow wait': () => client.events.follow(q, { wait: 5 }).next(),
  };
  const before = sent.length;
  for (const [what, call] of Object.entries(calls)) {
    await assert.rejects(call, (e) => e instanceof TypeError && /bare number/.test(e.message), what);
  }
  assert.equal(sent.length, before, 'no request was made');
  // The worker's options, its stop's grace and RetryLaterError, too.
  for (const option of ['lease', 'wait', 'extendEvery', 'grace', 'handlerTimeout', 'errorBackoff']) {
    assert.throws(() => client.worker(q, () => {}, { [option]: 1000 }), /bare number/, option);
  }
  assert.throws(() => new RetryLaterError('later', 30), /RetryLaterError retryAfter: a bare number \(30\) is refused/);
  const idle = client.worker(q, () => {});
  assert.throws(() => idle.stop({ grace: 5 }), /stop option grace: a bare number/);
  await idle.stop();
});

test('the worker options renamed at 1.0 are refused with their replacement', () => {
  const q = uniqueQueue('renamed');
  assert.throws(() => client.worker(q, () => {}, { leaseMs: 60_000 }), /worker option leaseMs was replaced at 1.0: give lease \(a duration string: lease: '30s'\)/);
  assert.throws(() => client.worker(q, () => {}, { onError: () => {} }), /worker.on\('error'/);
  assert.throws(() => client.worker(q, () => {}, { pollInterval: '1s' }), /unknown worker option pollInterval/);
});

test('durations reach the server as the right milliseconds', async () => {
  const q = uniqueQueue('ms');
  const t0 = Date.now();
  const s = await client.send(q, 'x', { id: 'd1', delay: '1m30s', ttl: '2h', handler_timeout: '1m' });
  const t1 = Date.now();
  const body = sent.findLast((r) => r.request === `POST /v1/queues/${q}/messages`).body;
  assert.deepEqual({ delay: body.delay, ttl: body.ttl, handler_timeout: body.handler_timeout }, { delay: 90_000, ttl: 7_200_000, handler_timeout: 60_000 });
  // The server read them as ms: due 90 s after the send (its clock and ours agree here).
  assert.ok(s.due_ms >= t0 + 90_000 - 1_000 && s.due_ms <= t1 + 90_000 + 1_000, `due ${s.due_ms - t0} ms after the send`);
  const info = await client.get(q, 'd1');
  assert.equal(info.expires_at_ms - info.due_ms, 7_200_000);
  // A receive's lease: the deadline is lease ms after the claim.
  await client.reschedule(q, 'd1', { delay: 0 });
  const r0 = Date.now();
  const [d] = await client.receive(q, { lease: '45s', wait: '2s' });
  assert.equal(d.handler_timeout_ms, 60_000);
  assert.ok(d.lease_deadline_ms >= r0 + 45_000 - 1_000 && d.lease_deadline_ms <= Date.now() + 45_000 + 1_000);
  const [extended] = await client.extend(q, [d.receipt], { lease: '2m' });
  assert.ok(extended.lease_deadline_ms >= Date.now() + 120_000 - 2_000);
  await client.ack(q, d.receipt);
  // Settings come back in their *_ms fields.
  const stats = await client.admin.configure(q, { idempotency_window: '1h', default_ttl: '5m', max_delay: '30d' });
  assert.equal(stats.idempotency_window_ms, 3_600_000);
  assert.equal(stats.default_ttl_ms, 300_000);
  assert.equal(stats.max_delay_ms, 30 * 86_400_000);
  // A time as a Date goes as Unix ms; RFC 3339 text as it is.
  const at = new Date(Date.now() + 3_600_000);
  assert.equal((await client.send(q, 'y', { deliver_at: at })).due_ms, at.getTime());
  const text = new Date(Date.now() + 7_200_000).toISOString();
  assert.equal((await client.send(q, 'z', { deliver_at: text })).due_ms, Date.parse(text));
});
