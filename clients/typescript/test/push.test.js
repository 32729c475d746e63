// Push delivery against a real server (--push-allow 127.0.0.1): the server pushes to an HTTP
// server this test starts; verifyPush accepts the real request and refuses it with a
// tampered body, header or an old timestamp; the example receiver answers 2xx (the message
// is acked) and refuses forgeries. Also the signature's known answer from the server's tests.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { DelayqClient, signPush, verifyPush } from 'delayq';
import { createPushReceiver } from '../examples/push-receiver.js';
import { startServer } from './helpers/server.js';
import { signal, uniqueQueue, waitFor, within } from './helpers/wait.js';

let server;
let client;
before(async () => {
  server = await startServer(['--push-allow', '127.0.0.1']);
  client = new DelayqClient({ baseUrl: server.url });
});
after(() => server?.stop());

/** Listens on a free loopback port; answers its base URL. */
function listen(httpServer) {
  return new Promise((ok) => httpServer.listen(0, '127.0.0.1', () => ok(`http://127.0.0.1:${httpServer.address().port}`)));
}

test('verifyPush matches the server\'s known answer (push/signature.rs)', () => {
  const headers = {
    'Delayq-Queue': 'orders', 'Delayq-Message-Id': 'close-1234', 'Delayq-Attempt': '2',
    'Delayq-Signature': 't=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5,'
      + 'v2=80755dc13779b3023f019d27621185b6d160d67896fd5fa599eed19b4dfc5dd0',
  };
  assert.equal(signPush('key', 1, { queue: 'orders', id: 'close-1234', attempt: 2, body: 'body' }), headers['Delayq-Signature']);
  assert.equal(verifyPush(headers, 'body', 'key', { nowSeconds: 10 }), true);
  assert.equal(verifyPush(headers, 'body', ['other', 'key'], { nowSeconds: 10 }), true);
  assert.equal(verifyPush(new Headers(headers), Buffer.from('body'), 'key', { nowSeconds: 10 }), true);
  assert.equal(verifyPush(headers, 'body', 'other', { nowSeconds: 10 }), false);
  assert.equal(verifyPush({ ...headers, 'Delayq-Attempt': '3' }, 'body', 'key', { nowSeconds: 10 }), false);
  assert.equal(verifyPush(headers, 'body', 'key', { nowSeconds: 302 }), false);
  // v1 alone (deprecated) is not accepted.
  const v1only = { ...headers, 'Delayq-Signature': headers['Delayq-Signature'].split(',').slice(0, 2).join(',') };
  assert.equal(verifyPush(v1only, 'body', 'key', { nowSeconds: 10 }), false);
});

test('the server pushes; verifyPush accepts it and refuses tampering and old timestamps', async () => {
  const q = uniqueQueue('push');
  const got = signal();
  const hook = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.resolve({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
    });
  });
  const base = await listen(hook);
  try {
    const target = await client.admin.setPushTarget(q, { url: `${base}/hook`, timeout: '5s', concurrency: 4 });
    assert.equal(target.signing_keys.length, 1);
    const [key] = target.signing_keys;
    await client.send(q, { order: 1234 }, { id: 'close-1234' });
    const { headers, body } = await within(got.promise, 10_000, 'the push');
    assert.equal(headers['delayq-queue'], q);
    assert.equal(headers['delayq-message-id'], 'close-1234');
    assert.equal(headers['delayq-attempt'], '1');
    assert.deepEqual(JSON.parse(body.toString()), { order: 1234 });

    assert.equal(verifyPush(headers, body, key), true);
    assert.equal(verifyPush(headers, body.toString(), [key]), true);
    assert.equal(verifyPush(headers, Buffer.from('{"order":1235}'), key), false, 'tampered body');
    assert.equal(verifyPush({ ...headers, 'delayq-attempt': '2' }, body, key), false, 'another attempt');
    assert.equal(verifyPush({ ...headers, 'delayq-message-id': 'close-1235' }, body, key), false, 'another id');
    assert.equal(verifyPush(headers, body, 'not-the-key-0123456789'), false, 'another key');
    // The same request, checked 301 s later, is too old.
    const t = Number(/t=(\d+)/.exec(headers['delayq-signature'])[1]);
    assert.equal(verifyPush(headers, body, key, { nowSeconds: t + 301 }), false, 'old timestamp');
    assert.equal(verifyPush(headers, body, key, { nowSeconds: t + 299 }), true);
    // Validly signed, but 10 minutes ago: refused by time alone.
    const old = { ...headers, 'delayq-signature': signPush(key, t - 600, { queue: q, id: 'close-1234', attempt: 1, body }) };
    assert.equal(verifyPush(old, body, key), false, 'signed 10 minutes ago');
    assert.equal(verifyPush(old, body, key, { toleranceSeconds: 700 }), true);
    // The 2xx acked it.
    await waitFor(async () => (await client.admin.stats(q)).in_flight === 0, { what: 'the push to be acked' });
    await assert.rejects(client.get(q, 'close-1234'), { code: 'not_found' });
  } finally {
    await client.admin.deletePushTarget(q).catch(() => {});
    hook.close();
  }
});

test('the example receiver verifies pushes with rotated keys and refuses forgeries', async () => {
  const q = uniqueQueue('receiver');
  const keys = ['new-key-0123456789abcdef', 'old-key-0123456789abcdef'];
  const received = [];
  const receiver = createPushReceiver({ keys: [keys[1]], onMessage: (info, body) => received.push({ info, body }) });
  const base = await listen(receiver);
  try {
    // During a rotation the server signs with both; a receiver with the old key alone accepts.
    const target = await client.admin.setPushTarget(q, { url: `${base}/hook`, signing_keys: keys });
    assert.deepEqual(target.signing_keys, keys);
    assert.equal((await client.admin.getPushTarget(q)).url, `${base}/hook`);
    await client.send(q, { n: 1 }, { id: 'p1' });
    await waitFor(() => received.length === 1, { what: 'the verified push' });
    assert.deepEqual(received[0].body, { n: 1 });
    assert.equal(received[0].info.id, 'p1');
    await waitFor(async () => (await client.admin.stats(q)).in_flight === 0, { what: 'the ack' });

    // Forged and replayed requests are refused.
    const body = '{"n":2}';
    const now = Math.floor(Date.now() / 1000);
    const signed = (b, t = now) => ({
      'content-type': 'application/json', 'delayq-queue': q, 'delayq-message-id': 'p2', 'delayq-attempt': '1',
      'delayq-signature': signPush(keys[1], t, { queue: q, id: 'p2', attempt: 1, body: b }),
    });
    const post = (headers, b) => fetch(`${base}/hook`, { method: 'POST', headers, body: b }).then((r) => r.status);
    assert.equal(await post(signed(body), '{"n":3}'), 401, 'tampered body');
    assert.equal(await post(signed(body, now - 400), body), 401, 'old timestamp');
    assert.equal(await post(signed(body), body), 200);
    assert.equal(await post(signed(body), body), 409, 'replay');
    assert.equal(received.length, 2);
  } finally {
    await client.admin.deletePushTarget(q);
    await assert.rejects(client.admin.getPushTarget(q), { code: 'not_found' });
    receiver.close();
  }
});
