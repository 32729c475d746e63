// Verifying pushed requests (crates/delayq-server/src/push/signature.rs). Each push carries
// `Delayq-Signature: t=<unix s>,v1=<hex>,v2=<hex>` with a v1 and a v2 per signing key; v2 is
// HMAC-SHA256(key, `<t>\n<queue>\n<id>\n<attempt>\n<body>`) over the Delayq-Queue,
// Delayq-Message-Id and Delayq-Attempt headers, so a captured request cannot be replayed as
// another attempt, message or queue. v1 (`<t>.<body>` alone) is deprecated and never
// accepted here. A receiver must also refuse an id and attempt it saw in the last 5 minutes.

import { createHmac } from 'node:crypto';
import { HeaderSource, VerifyOptions, bytes, header, mac, parseSignature, verifySignature } from './signature.js';

export type { HeaderSource, VerifyOptions };

/** What a push says about itself (from its headers; trust it only once verified). */
export interface PushInfo {
  queue: string;
  id: string;
  attempt: number;
  /** When the message was due, ms since the Unix epoch (absent on a failure callback). */
  dueMs?: number;
  /** The signature's time, Unix seconds. */
  timestamp: number;
}

/** The push's queue, id, attempt and time, or undefined when a header is missing. */
export function pushInfo(headers: HeaderSource): PushInfo | undefined {
  const queue = header(headers, 'delayq-queue');
  const id = header(headers, 'delayq-message-id');
  const attempt = header(headers, 'delayq-attempt');
  const signature = header(headers, 'delayq-signature');
  if (queue === undefined || id === undefined || attempt === undefined || signature === undefined) return undefined;
  const t = parseSignature(signature, 'v2').t;
  if (t === undefined || !/^\d+$/.test(attempt)) return undefined;
  const due = header(headers, 'delayq-due-ms');
  return { queue, id, attempt: Number(attempt), dueMs: due === undefined ? undefined : Number(due), timestamp: t };
}

function v2(key: string, t: number, queue: string, id: string, attempt: string, body: Uint8Array): Buffer {
  return mac(key, `${t}\n${queue}\n${id}\n${attempt}\n`, body);
}

/**
 * True when the push's `Delayq-Signature` has a v2 made with one of `keys` over exactly these
 * headers and `rawBody` (the bytes as received: parse JSON only after verifying), at a time
 * within `toleranceSeconds` of now. Compares in constant time.
 */
export function verifyPush(
  headers: HeaderSource,
  rawBody: Uint8Array | string,
  keys: string | string[],
  options: VerifyOptions = {},
): boolean {
  const signature = header(headers, 'delayq-signature');
  const queue = header(headers, 'delayq-queue');
  const id = header(headers, 'delayq-message-id');
  const attempt = header(headers, 'delayq-attempt');
  if (signature === undefined || queue === undefined || id === undefined || attempt === undefined) return false;
  if (!/^\d+$/.test(attempt)) return false;
  const body = bytes(rawBody);
  // The attempt as a number, as the server signs it (`2`, never `02`).
  const signedAttempt = String(Number(attempt));
  return verifySignature(signature, 'v2', keys, (key, t) => v2(key, t, queue, id, signedAttempt, body), options);
}

/**
 * The `Delayq-Signature` value the server would send (v1 and v2 per key). For testing a
 * receiver without a server.
 */
export function signPush(
  keys: string | string[],
  timestamp: number,
  signed: { queue: string; id: string; attempt: number; body: Uint8Array | string },
): string {
  const body = bytes(signed.body);
  let value = `t=${timestamp}`;
  for (const key of Array.isArray(keys) ? keys : [keys]) {
    const v1 = createHmac('sha256', key).update(`${timestamp}.`).update(body).digest('hex');
    value += `,v1=${v1},v2=${v2(key, timestamp, signed.queue, signed.id, String(signed.attempt), body).toString('hex')}`;
  }
  return value;
}

/**
 * Remembers the (id, attempt) pairs seen within the tolerance, so that a replayed push is
 * refused (each attempt is one request). In memory: one process's receiver.
 */
export class ReplayGuard {
  private readonly seen = new Map<string, number>();
  constructor(private readonly toleranceSeconds = 300) {}

  /** True the first time this push is seen; false for a replay. */
  firstTime(info: Pick<PushInfo, 'queue' | 'id' | 'attempt'>, nowMs = Date.now()): boolean {
    return this.firstTimeKey(`${info.queue}\n${info.id}\n${info.attempt}`, nowMs);
  }

  /** True the first time `key` is seen within the window (a webhook's event id, say). */
  firstTimeKey(key: string, nowMs = Date.now()): boolean {
    // Entries are kept in insertion order, which is expiry order: drop the expired prefix.
    for (const [k, expires] of this.seen) {
      if (expires > nowMs) break;
      this.seen.delete(k);
    }
    if (this.seen.has(key)) return false;
    // Kept twice the tolerance: a timestamp may be up to the tolerance ahead or behind.
    this.seen.set(key, nowMs + 2 * this.toleranceSeconds * 1000);
    return true;
  }
}
