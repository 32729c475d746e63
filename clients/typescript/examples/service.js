// An example service built on the client: a shop that closes unpaid orders after a delay.
// - It sends a "close order" message per order, delayed; an order paid in time cancels its.
// - A worker receives the due ones, closes the orders and sends an email message for each.
// - The email queue is delivered by push to this service's own HTTP endpoint
//   (examples/push-receiver.js), which verifies each request's signature.
// It exits once every expected email has arrived (or fails after a deadline).
//
//   delayq serve --push-allow 127.0.0.1 &
//   DELAYQ_URL=http://127.0.0.1:7400 node examples/service.js
//
// Environment: DELAYQ_URL, DELAYQ_TOKEN (an admin token, when the server has tokens),
// QUEUE_PREFIX (default "shop"), DEADLINE_MS (default 20000).

import { DelayqClient } from 'delayq';
import { createPushReceiver } from './push-receiver.js';

const client = new DelayqClient({
  baseUrl: process.env.DELAYQ_URL ?? 'http://127.0.0.1:7400',
  token: process.env.DELAYQ_TOKEN,
});
const prefix = process.env.QUEUE_PREFIX ?? 'shop';
const ORDERS = `${prefix}-close-orders`;
const EMAILS = `${prefix}-emails`;
let step = 'starting';
const deadline = setTimeout(() => {
  console.error(`deadline passed while ${step}`);
  process.exit(1);
}, Number(process.env.DEADLINE_MS ?? 20_000));

const orders = [
  { order: 1, paid: false },
  { order: 2, paid: true },
  { order: 3, paid: false },
];
const expected = orders.filter((o) => !o.paid).length;
const emails = [];
let allEmails;
const allArrived = new Promise((resolve) => (allEmails = resolve));

// 1. Pushes: an endpoint on a free port, then the email queue's push target pointing at it.
let signingKeys = [];
const receiver = createPushReceiver({
  keys: () => signingKeys,
  onMessage: (info, body) => {
    console.log(`email pushed: ${body.text} (message ${info.id}, attempt ${info.attempt})`);
    emails.push(body);
    if (emails.length === expected) allEmails();
  },
  log: (line) => console.error(line),
});
await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const hook = `http://127.0.0.1:${receiver.address().port}/emails`;
// Keys first: a push may arrive as soon as the target is set.
const target = await client.admin.setPushTarget(EMAILS, { url: hook, timeout: '5s' });
signingKeys = target.signing_keys;
console.log(`push target of ${EMAILS}: ${hook}`);

// 2. The worker: closes each order that comes due and queues its email. The handler hands
//    its signal to the calls it makes, so that a stop that gives up on it ends them too.
const worker = client.worker(ORDERS, async (delivery, { signal }) => {
  const { order } = delivery.payload;
  console.log(`closing unpaid order ${order}`);
  await client.send(EMAILS, { text: `order ${order} was closed unpaid` }, { id: `email-order-${order}` }, { signal });
}, { concurrency: 2, lease: '10s', wait: '2s', handleSignals: true });
worker.on('failed', (delivery, error) => console.error(`order message ${delivery.id} failed: ${error}`));
worker.start();

// 3. Orders come in; each gets a closing message due in 300 ms ('15m' in real life).
for (const o of orders) {
  const sent = await client.send(ORDERS, { order: o.order }, { id: `close-${o.order}`, delay: '300ms' });
  console.log(`order ${o.order} placed; closing ${sent.id} scheduled`);
  if (o.paid) {
    await client.cancel(ORDERS, `close-${o.order}`);
    console.log(`order ${o.order} paid; its closing cancelled`);
  }
}

step = 'waiting for the emails';
await allArrived;
step = 'stopping the worker';
// stop() returns once nothing of the worker's is left running: no receive, no lease
// extension, every handler settled (or released after the grace).
await worker.stop({ grace: '5s' });
console.log('worker stopped');
step = 'removing the push target';
await client.admin.deletePushTarget(EMAILS);
step = 'closing the receiver';
// close() only stops listening: the server's pooled keep-alive connections (and a push it
// may still have under way) would keep this process alive until they time out.
await new Promise((resolve) => {
  receiver.close(resolve);
  receiver.closeAllConnections();
});
clearTimeout(deadline);
console.log(`done: ${emails.length} emails`);
// Nothing should keep the process alive now. Should something (a handler's call, a socket,
// a timer), this says what, without keeping the process alive itself (unref).
setTimeout(() => console.error(`still running 2 s after done: ${process.getActiveResourcesInfo().join(', ')}`), 2_000).unref();
