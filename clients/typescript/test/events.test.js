// A queue's events against a real server: a JSON page (from, kind, id, limit, wait), an
// async iterator that follows them as they happen and resumes from a cursor; and webhooks:
// the server POSTs events to a loopback receiver, verifyWebhook accepts the real request
// (its w1) and refuses tampering, another key and an old t; w1's known answer.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { DelayqClient, ReplayGuard, signWebhook, verifyWebhook, webhookInfo } from 'delayq';
import { startServer } from './helpers/server.js';
import { signal, uniqueQueue, waitFor, within } from './helpers/wait.js';

let server;
let client;
before(async () => {
  server = await startServer(['--push-allow', '127.0.0.1']);
  client = new DelayqClient({ baseUrl: server.url });
});
after(() => server?.stop());

/** Sends `id`, receives it and acks it: sent, delivered, acked. */
async function lifeOf(q, id) {
  await client.send(q, { id }, { id });
  const [d] = await client.receive(q, { wait: '2s' });
  assert.equal(d.id, id);
  await client.ack(q, d.receipt);
}

test('a page of events: from oldest, by kind, by id, with limit and a cursor to go on from', async () => {
  const q = uniqueQueue('events');
  assert.equal((await client.admin.configure(q, { events: {} })).events_max, 20_000);
  await lifeOf(q, 'e1');
  await lifeOf(q, 'e2');
  const all = await client.events.page(q, { from: 'oldest' });
  assert.deepEqual(all.events.map((e) => `${e.kind} ${e.id}`), ['sent e1', 'delivered e1', 'acked e1', 'sent e2', 'delivered e2', 'acked e2']);
  assert.ok(all.events.every((e) => typeof e.cursor === 'string' && e.at_ms > 0));
  assert.equal(all.events[1].attempt, 1);
  assert.deepEqual((await client.events.page(q, { from: 'oldest', kind: 'acked' })).events.map((e) => e.id), ['e1', 'e2']);
  assert.deepEqual((await client.events.page(q, { from: 'oldest', kind: ['sent', 'acked'], id: 'e2' })).events.map((e) => e.kind), ['sent', 'acked']);
  const two = await client.events.page(q, { from: 'oldest', limit: 2 });
  assert.equal(two.events.length, 2);
  const rest = await client.events.page(q, { from: two.cursor });
  assert.deepEqual(rest.events.map((e) => e.kind), ['acked', 'sent', 'delivered', 'acked']);
  // Nothing new: a page with a wait answers empty when the wait ends, its cursor unmoved.
  const quiet = await client.events.page(q, { from: rest.cursor, wait: '100ms' });
  assert.deepEqual(quiet.events, []);
  await assert.rejects(client.events.page(q, { from: 'no-such-cursor' }), { code: 'invalid_cursor' });
});

test('follow() yields events as they happen, stops on break or abort, and resumes from a cursor', async () => {
  const q = uniqueQueue('follow');
  await client.admin.configure(q, { events: {} });
  const seen = [];
  const acked = signal();
  // Ends the follower should the test fail before its break.
  const stop = new AbortController();
  const following = (async () => {
    for await (const event of client.events.follow(q, { from: 'now', kind: ['sent', 'acked'], wait: '1s', signal: stop.signal })) {
      seen.push(event);
      if (event.kind === 'acked') break;
    }
    acked.resolve();
  })();
  // `from: 'now'` counts from the first page's start: wait until that page is under way.
  // (Probes are due in an hour: they stay out of the receives below.)
  await waitFor(async () => {
    await client.send(q, 'probe', { id: `probe-${Date.now()}`, delay: '1h' });
    return seen.length > 0;
  }, { what: 'the follower to see a send', intervalMs: 100 });
  try {
    await lifeOf(q, 'f1');
    await within(acked.promise, 10_000, 'the acked event');
  } finally {
    stop.abort();
    await following;
  }
  assert.equal(seen.at(-1).kind, 'acked');
  assert.equal(seen.at(-1).id, 'f1');
  assert.ok(seen.some((e) => e.kind === 'sent' && e.id === 'f1'));
  assert.ok(!seen.some((e) => e.kind === 'delivered'), 'filtered by kind');

  // Resumed after a restart from the last cursor seen: the events since, none twice.
  const cursor = seen.at(-1).cursor;
  await lifeOf(q, 'f2');
  const controller = new AbortController();
  const resumed = [];
  for await (const event of client.events.follow(q, { from: cursor, signal: controller.signal, wait: '1s' })) {
    resumed.push(`${event.kind} ${event.id}`);
    if (event.kind === 'acked') controller.abort();
  }
  assert.deepEqual(resumed, ['sent f2', 'delivered f2', 'acked f2']);
});

test("verifyWebhook matches w1's known answer (computed with Python's hmac module)", () => {
  const body = '{"kind":"acked"}';
  const headers = {
    'Delayq-Queue': 'orders', 'Delayq-Message-Id': 'close-1', 'Delayq-Event': 'acked',
    'Delayq-Event-Id': '1700000000000-0', 'Delayq-Attempt': '1',
    'Delayq-Signature': 't=1,w1=7afa7656431bb5c319189dc2512fb0aef3b568ecce01b216427fdd1a9db74a23',
  };
  assert.equal(verifyWebhook(headers, body, 'key', { nowSeconds: 10 }), true);
  assert.equal(verifyWebhook(headers, body, ['old', 'key'], { nowSeconds: 10 }), true);
  assert.equal(verifyWebhook(headers, body, 'other', { nowSeconds: 10 }), false);
  assert.equal(verifyWebhook({ ...headers, 'Delayq-Event-Id': '1700000000000-1' }, body, 'key', { nowSeconds: 10 }), false);
  assert.equal(verifyWebhook(headers, body, 'key', { nowSeconds: 302 }), false);
  const signed = signWebhook('key', 1, { queue: 'orders', id: 'close-1', eventId: '1700000000000-0', attempt: 1, body });
  assert.match(signed, /,w1=7afa7656431bb5c319189dc2512fb0aef3b568ecce01b216427fdd1a9db74a23$/);
  assert.deepEqual(webhookInfo(headers), {
    queue: 'orders', id: 'close-1', event: 'acked', eventId: '1700000000000-0', attempt: 1, timestamp: 1,
  });
});

test('the server sends events to a webhook; verifyWebhook accepts it and refuses tampering', async () => {
  const q = uniqueQueue('hooks');
  const got = [];
  const arrived = signal();
  const hook = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c)).on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
      arrived.resolve();
    });
  });
  await new Promise((ok) => hook.listen(0, '127.0.0.1', ok));
  try {
    const url = `http://127.0.0.1:${hook.address().port}/events`;
    const set = await client.admin.setWebhooks(q, [{ url, kinds: ['acked'] }]);
    assert.deepEqual(set.webhooks, [{ url, kinds: ['acked'] }]);
    assert.equal(set.signing_keys.length, 1);
    assert.deepEqual((await client.admin.getWebhooks(q)).signing_keys, set.signing_keys);
    const [key] = set.signing_keys;
    await lifeOf(q, 'w1');
    await within(arrived.promise, 15_000, 'the webhook request');
    const { headers, body } = got[0];
    const event = JSON.parse(body.toString());
    assert.equal(event.kind, 'acked');
    assert.equal(event.id, 'w1');
    const info = webhookInfo(headers);
    assert.equal(info.queue, q);
    assert.equal(info.event, 'acked');
    assert.equal(info.eventId, event.cursor);

    assert.equal(verifyWebhook(headers, body, key), true, "the server's own w1 verifies");
    assert.equal(verifyWebhook(headers, Buffer.from(body.toString().replace('acked', 'dead')), key), false, 'a changed body');
    assert.equal(verifyWebhook({ ...headers, 'delayq-event-id': `${info.eventId}0` }, body, key), false, 'another event id');
    assert.equal(verifyWebhook({ ...headers, 'delayq-queue': `${q}x` }, body, key), false, 'another queue');
    assert.equal(verifyWebhook(headers, body, 'another-key-0123456789'), false, 'another key');
    assert.equal(verifyWebhook(headers, body, key, { nowSeconds: info.timestamp + 301 }), false, 'more than 5 minutes old');
    // A receiver drops an event id it has handled.
    const guard = new ReplayGuard();
    assert.equal(guard.firstTimeKey(info.eventId), true);
    assert.equal(guard.firstTimeKey(info.eventId), false);

    await client.admin.deleteWebhooks(q);
    await assert.rejects(client.admin.getWebhooks(q), { code: 'not_found' });
  } finally {
    hook.close();
    hook.closeAllConnections();
  }
});
