// Verifying webhook requests (docs/events.md, "Webhooks"): a queue's events POSTed to the
// URLs `admin.setWebhooks` gave. Besides a push's v1 and v2, each `Delayq-Signature` has a
// `w1` per key: HMAC-SHA256(key, `<t>\n<queue>\n<event id>\n<body>`) over the Delayq-Queue
// and Delayq-Event-Id headers. A receiver drops an event id it has handled (one message has
// many events under one id and attempt, so a push's id-and-attempt rule would drop real
// ones); `ReplayGuard.firstTimeKey(eventId)` does that in memory.

import { HeaderSource, VerifyOptions, bytes, header, mac, parseSignature } from './signature.js';
import { verifySignature } from './signature.js';
import { signPush } from './push.js';

/** What a webhook request says about itself (trust it only once verified). */
export interface WebhookInfo {
  queue: string;
  /** The message the event is about. */
  id: string;
  /** The event's kind (`acked`, `dead`, ...). */
  event: string;
  /** The event's id (its cursor): drop one already handled. */
  eventId: string;
  /** This request's try. */
  attempt: number;
  /** The signature's time, Unix seconds. */
  timestamp: number;
}

function w1(key: string, t: number, queue: string, eventId: string, body: Uint8Array): Buffer {
  return mac(key, `${t}\n${queue}\n${eventId}\n`, body);
}

/**
 * True when the request's `Delayq-Signature` has a w1 made with one of `keys` over these
 * Delayq-Queue and Delayq-Event-Id headers and `rawBody` (the bytes as received), at a time
 * within `toleranceSeconds` (default 300) of now. Compares in constant time.
 */
export function verifyWebhook(
  headers: HeaderSource,
  rawBody: Uint8Array | string,
  keys: string | string[],
  options: VerifyOptions = {},
): boolean {
  const signature = header(headers, 'delayq-signature');
  const queue = header(headers, 'delayq-queue');
  const eventId = header(headers, 'delayq-event-id');
  if (signature === undefined || queue === undefined || eventId === undefined) return false;
  const body = bytes(rawBody);
  return verifySignature(signature, 'w1', keys, (key, t) => w1(key, t, queue, eventId, body), options);
}

/** The webhook's queue, message id, event kind and id, try and time; undefined when a header is missing. */
export function webhookInfo(headers: HeaderSource): WebhookInfo | undefined {
  const queue = header(headers, 'delayq-queue');
  const id = header(headers, 'delayq-message-id');
  const event = header(headers, 'delayq-event');
  const eventId = header(headers, 'delayq-event-id');
  const attempt = header(headers, 'delayq-attempt');
  const signature = header(headers, 'delayq-signature');
  if ([queue, id, event, eventId, attempt, signature].some((v) => v === undefined)) return undefined;
  const t = parseSignature(signature!, 'w1').t;
  if (t === undefined || !/^\d+$/.test(attempt!)) return undefined;
  return { queue: queue!, id: id!, event: event!, eventId: eventId!, attempt: Number(attempt), timestamp: t };
}

/**
 * The `Delayq-Signature` value the server would send with a webhook request (v1, v2 and w1
 * per key). For testing a receiver without a server.
 */
export function signWebhook(
  keys: string | string[],
  timestamp: number,
  signed: { queue: string; id: string; eventId: string; attempt: number; body: Uint8Array | string },
): string {
  let value = signPush(keys, timestamp, signed);
  for (const key of Array.isArray(keys) ? keys : [keys]) {
    value += `,w1=${w1(key, timestamp, signed.queue, signed.eventId, bytes(signed.body)).toString('hex')}`;
  }
  return value;
}
