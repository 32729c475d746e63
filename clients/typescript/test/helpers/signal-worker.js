// A worker process for the SIGTERM test: runs a worker with handleSignals on QUEUE of
// DELAYQ_URL whose handler holds each message until told to stop, prints "started <id>" when
// one starts and "stopped" once run() resolves, then exits by itself.

import { DelayqClient } from 'delayq';

const client = new DelayqClient(process.env.DELAYQ_URL);
const worker = client.worker(process.env.QUEUE, (d, { signal }) => new Promise((resolve) => {
  console.log(`started ${d.id}`);
  signal.addEventListener('abort', resolve);
}), { handleSignals: true, grace: '200ms', wait: '1s', lease: '60s' });
await worker.run();
console.log('stopped');
