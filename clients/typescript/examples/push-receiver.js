// An example push receiver on node:http: delayq POSTs each due message here (PUT
// /v1/queues/{q}/push with this URL). It reads the raw body, verifies `Delayq-Signature`
// with the queue target's signing keys, refuses replays, and answers 2xx to ack (anything
// else makes delayq retry; 4xx other than 408/429 makes a dead letter).
//
// Run alone:  DELAYQ_SIGNING_KEYS=<key>[,<old key>] PORT=8080 node examples/push-receiver.js
// Or import createPushReceiver() into your service (examples/service.js does).

import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';
import { ReplayGuard, pushInfo, verifyPush } from 'delayq';

/**
 * An http.Server that verifies pushes and hands each to `onMessage(info, body)`:
 * info = { queue, id, attempt, dueMs, timestamp }, body = the payload (JSON parsed when the
 * content type is JSON, else a Buffer). A throw from onMessage answers 500: delayq retries.
 * `keys` is an array, or a function answering the current keys (they may be set later).
 */
export function createPushReceiver({ keys, onMessage, toleranceSeconds = 300, log = () => {} }) {
  const replays = new ReplayGuard(toleranceSeconds);
  const currentKeys = typeof keys === 'function' ? keys : () => keys;
  return createServer((req, res) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > 16 * 1024 * 1024) req.destroy(); // bound what a stranger can make us hold
      else chunks.push(chunk);
    });
    req.on('end', async () => {
      const raw = Buffer.concat(chunks);
      // Verify the bytes as received, before parsing anything.
      if (!verifyPush(req.headers, raw, currentKeys(), { toleranceSeconds })) {
        log(`refused: bad or old signature`);
        return answer(res, 401, 'bad signature');
      }
      const info = pushInfo(req.headers);
      if (!replays.firstTime(info)) {
        log(`refused: replay of ${info.id} attempt ${info.attempt}`);
        return answer(res, 409, 'replayed');
      }
      try {
        const json = /^application\/json\b/.test(req.headers['content-type'] ?? '');
        await onMessage(info, json ? JSON.parse(raw.toString('utf8')) : raw);
        answer(res, 200, 'ok');
      } catch (error) {
        log(`handler failed for ${info.id}: ${error.message}`);
        answer(res, 500, error.message.slice(0, 200)); // delayq keeps it as the attempt's error
      }
    });
  });
}

function answer(res, status, text) {
  res.writeHead(status, { 'content-type': 'text/plain' });
  res.end(text);
}

// Run as a program: print each verified push.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const keys = (process.env.DELAYQ_SIGNING_KEYS ?? '').split(',').filter(Boolean);
  if (keys.length === 0) {
    console.error('set DELAYQ_SIGNING_KEYS to the signing key(s) of the queue\'s push target');
    process.exit(2);
  }
  const server = createPushReceiver({
    keys,
    onMessage: (info, body) => console.log(info.queue, info.id, info.attempt, JSON.stringify(body)),
    log: (line) => console.error(line),
  });
  const port = Number(process.env.PORT ?? 8080);
  server.listen(port, '127.0.0.1', () => console.error(`push receiver on http://127.0.0.1:${port}/hook`));
  process.once('SIGTERM', () => server.close());
  process.once('SIGINT', () => server.close());
}
