// The API's operations, as `METHOD path` exactly as the server's OpenAPI document names them,
// mapped to the client method that calls each. The client's methods call the transport with
// these keys (a typo does not compile), and the coverage test (test/coverage.test.js) checks
// that every operation of a running server is in ROUTES or LEFT_OUT, that every ROUTES
// method exists (`admin.stats` is `client.admin.stats`), and that no entry names an
// operation the server no longer has.

export const ROUTES = {
  // produce (role send)
  'POST /v1/queues/{queue}/messages': 'send',
  'POST /v1/queues/{queue}/batch': 'sendBatch',
  'GET /v1/queues/{queue}/messages/{id}': 'get',
  'DELETE /v1/queues/{queue}/messages/{id}': 'cancel',
  'POST /v1/queues/{queue}/cancel': 'cancelMany',
  'POST /v1/queues/{queue}/messages/{id}/reschedule': 'reschedule',
  // browse (any token but monitor)
  'GET /v1/queues/{queue}/messages': 'listMessages',
  'GET /v1/queues/{queue}/events': 'events.page',
  // consume (role consume)
  'POST /v1/queues/{queue}/receive': 'receive',
  'POST /v1/receive': 'receiveMany',
  'POST /v1/queues/{queue}/ack': 'ack',
  'POST /v1/queues/{queue}/nack': 'nack',
  'POST /v1/queues/{queue}/extend': 'extend',
  'POST /v1/queues/{queue}/release': 'release',
  // admin (role admin)
  'GET /v1/queues': 'admin.queues',
  'GET /v1/queues/{queue}': 'admin.stats',
  'PUT /v1/queues/{queue}': 'admin.createQueue',
  'PATCH /v1/queues/{queue}': 'admin.configure',
  'DELETE /v1/queues/{queue}': 'admin.deleteQueue',
  'POST /v1/queues/{queue}/pause': 'admin.pause',
  'POST /v1/queues/{queue}/resume': 'admin.resume',
  'GET /v1/queues/{queue}/dead': 'admin.deadLetters',
  'POST /v1/queues/{queue}/requeue': 'admin.requeue',
  'POST /v1/queues/{queue}/purge': 'admin.purge',
  'PUT /v1/queues/{queue}/push': 'admin.setPushTarget',
  'GET /v1/queues/{queue}/push': 'admin.getPushTarget',
  'DELETE /v1/queues/{queue}/push': 'admin.deletePushTarget',
  'PUT /v1/queues/{queue}/webhooks': 'admin.setWebhooks',
  'GET /v1/queues/{queue}/webhooks': 'admin.getWebhooks',
  'DELETE /v1/queues/{queue}/webhooks': 'admin.deleteWebhooks',
  'GET /v1/queues/{queue}/schedules': 'schedules.list',
  'PUT /v1/queues/{queue}/schedules/{name}': 'schedules.put',
  'GET /v1/queues/{queue}/schedules/{name}': 'schedules.get',
  'PATCH /v1/queues/{queue}/schedules/{name}': 'schedules.pause',
  'DELETE /v1/queues/{queue}/schedules/{name}': 'schedules.delete',
  'POST /v1/queues/{queue}/schedules/{name}/backfill': 'schedules.backfill',
  'GET /v1/queues/{queue}/groups': 'groups.list',
  'GET /v1/queues/{queue}/groups/{group}': 'groups.get',
  'PATCH /v1/queues/{queue}/groups/{group}': 'groups.set',
  // probes
  'GET /healthz': 'health',
  'GET /readyz': 'ready',
} as const;

/** A route the client calls. */
export type Route = keyof typeof ROUTES;

/** Method and path of a route key. */
export function route(r: Route): { method: string; path: string } {
  const space = r.indexOf(' ');
  return { method: r.slice(0, space), path: r.slice(space + 1) };
}

/** Operations this client does not wrap, each with why. Call them with `client.raw()`. */
export const LEFT_OUT: Readonly<Record<string, string>> = {
  'GET /metrics': 'Prometheus text for a scraper, not for application code',
  'GET /v1/queues/{queue}/format': 'data-format upgrades belong to a deploy (delayq format show|upgrade)',
  'POST /v1/queues/{queue}/upgrade': 'data-format upgrades belong to a deploy (delayq format show|upgrade)',
  'GET /v1/processes': 'data-format upgrades belong to a deploy (delayq format show|upgrade)',
  'GET /v1/audit': "who did what on the server: an operator's read (delayq audit, the dashboard's audit log)",
  'POST /v1/queues/{queue}/rotate-keys': "sealing a queue's stored payloads again with a new key: an operator's step (delayq keys rotate, the dashboard)",
};
