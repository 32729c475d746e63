// OpenAPI coverage: every `METHOD path` of the running server's /openapi.json must be in
// ROUTES (with a client method that exists) or in LEFT_OUT (with a reason). A route added
// to the server without updating the client fails here; so does a stale entry.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { DelayqClient, LEFT_OUT, ROUTES } from 'delayq';
import { startServer } from './helpers/server.js';

let server;
let client;
let operations;
before(async () => {
  server = await startServer();
  client = new DelayqClient({ baseUrl: server.url });
  const doc = await client.openapi();
  const methods = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];
  operations = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.keys(item).filter((m) => methods.includes(m)).map((m) => `${m.toUpperCase()} ${path}`));
});
after(() => server?.stop());

test('the server documents operations', () => {
  assert.ok(operations.length >= 20, `only ${operations.length} operations`);
  assert.ok(operations.includes('POST /v1/queues/{queue}/messages'));
});

test('every server operation is covered by the client or left out with a reason', () => {
  const missing = operations.filter((op) => !(op in ROUTES) && !(op in LEFT_OUT));
  assert.deepEqual(missing, [], `operations neither in ROUTES nor in LEFT_OUT (src/routes.ts):\n${missing.join('\n')}`);
  for (const [op, reason] of Object.entries(LEFT_OUT)) {
    assert.ok(typeof reason === 'string' && reason.length > 10, `${op}: give a reason`);
    assert.ok(!(op in ROUTES), `${op} is both covered and left out`);
  }
});

test('every ROUTES entry names a client method that exists', () => {
  for (const [op, name] of Object.entries(ROUTES)) {
    // `schedules.put` is client.schedules.put: walk the dotted name from the client.
    const parts = name.split('.');
    const target = parts.slice(0, -1).reduce((object, key) => object?.[key], client);
    assert.equal(typeof target?.[parts.at(-1)], 'function', `${op} -> ${name} is not a method`);
  }
});

test('no entry names an operation the server does not have', () => {
  const stale = [...Object.keys(ROUTES), ...Object.keys(LEFT_OUT)].filter((op) => !operations.includes(op));
  assert.deepEqual(stale, [], `entries for operations the server no longer has:\n${stale.join('\n')}`);
});
