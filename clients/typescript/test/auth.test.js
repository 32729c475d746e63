// Token roles against a server started with --tokens: each role's token does its own calls,
// a call of another role is a ForbiddenError (403 forbidden), no token or an unknown one an
// UnauthorizedError (401 unauthorized).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DelayqClient, ForbiddenError, UnauthorizedError } from 'delayq';
import { startServer } from './helpers/server.js';
import { uniqueQueue } from './helpers/wait.js';

// The server takes tokens of at least 16 characters.
const TOKENS = { send: 'send-token-0123456789', consume: 'consume-token-0123456789', admin: 'admin-token-0123456789' };

let server;
const as = {};
before(async () => {
  server = await startServer(['--tokens', Object.entries(TOKENS).map(([r, t]) => `${r}:${t}`).join(',')]);
  for (const [role, token] of Object.entries(TOKENS)) as[role] = new DelayqClient({ baseUrl: server.url, token });
  as.nobody = new DelayqClient({ baseUrl: server.url });
  as.stranger = new DelayqClient({ baseUrl: server.url, token: 'not-a-token-0123456789' });
});
after(() => server?.stop());

test('each role does its own calls', async () => {
  const q = uniqueQueue('roles');
  await as.send.send(q, { ok: true }, { id: 'a1' });
  assert.equal((await as.send.get(q, 'a1')).state, 'ready');
  const [d] = await as.consume.receive(q);
  await as.consume.ack(q, d.receipt);
  assert.equal((await as.admin.admin.stats(q)).in_flight, 0);
  // Admin may do everything; any valid token may read /readyz.
  await as.admin.send(q, 2);
  assert.equal((await as.consume.ready()).status, 'ready');
});

test('a call of another role is a ForbiddenError (403)', async () => {
  const q = uniqueQueue('forbidden');
  const error = await as.send.admin.stats(q).catch((e) => e);
  assert.ok(error instanceof ForbiddenError, String(error));
  assert.equal(error.status, 403);
  assert.equal(error.code, 'forbidden');
  await assert.rejects(as.consume.send(q, 1), ForbiddenError);
  await assert.rejects(as.send.receive(q), ForbiddenError);
  await assert.rejects(as.consume.admin.pause(q), ForbiddenError);
});

test('no token or an unknown one is an UnauthorizedError (401)', async () => {
  const q = uniqueQueue('unauthorized');
  for (const client of [as.nobody, as.stranger]) {
    const error = await client.send(q, 1).catch((e) => e);
    assert.ok(error instanceof UnauthorizedError, String(error));
    assert.equal(error.status, 401);
    assert.equal(error.code, 'unauthorized');
  }
  // /healthz needs none.
  assert.equal((await as.nobody.health()).status, 'ok');
});
