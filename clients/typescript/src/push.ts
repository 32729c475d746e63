// Verifying pushed requests (crates/delayq-server/src/push/signature.rs). Each push carries
// `Delayq-Signature: t=<unix s>,v1=<hex>,v2=<hex>` with a v1 and a v2 per signing key; v2 is
// HMAC-SHA256(key, `<t>\n<queue>\n<id>\n<attempt>\n<body>`) over the Delayq-Queue,
// Delayq-Message-Id and Delayq-Attempt headers, so a captured request cannot be replayed as
// another attempt, message or queue. v1 (`<t>.<body>` alone) is deprecated and never
// accepted here. A receiver must also refuse an id and attempt it saw in the last 5 minutes.

import { createHmac, timingSafeEqual } from 'node:crypto';

/** Headers as node:http gives them, a fetch Headers, or a plain record (any case). */
export type HeaderSource =
  | Headers
  | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** Largest distance of `t` from now, seconds (default 300). */
  toleranceSeconds?: number;
  /** Now, Unix seconds (default: the clock); for tests. */
  nowSeconds?: number;
}

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

/** The value of header `name` (lowercase) in `headers`. */
function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(',') : v;
  }
  return undefined;
}

/** The push's queue, id, attempt and time, or undefined when a header is missing. */
export function pushInfo(headers: HeaderSource): PushInfo | undefined {
  const queue = header(headers, 'delayq-queue');
  const id = header(headers, 'delayq-message-id');
  const attempt = header(headers, 'delayq-attempt');
  const signature = header(headers, 'delayq-signature');
  if (queue === undefined || id === undefined || attempt === undefined || signature === undefined) return undefined;
  const t = parseSignature(signature).t;
  if (t === undefined || !/^\d+$/.test(attempt)) return undefined;
  const due = header(headers, 'delayq-due-ms');
  return { queue, id, attempt: Number(attempt), dueMs: due === undefined ? undefined : Number(due), timestamp: t };
}

function parseSignature(value: string): { t?: number; v2: string[] } {
  let t: number | undefined;
  const v2: string[] = [];
  for (const part of value.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const val = part.slice(eq + 1).trim();
    if (key === 't' && /^\d+$/.test(val)) t = Number(val);
    else if (key === 'v2') v2.push(val);
  }
  return { t, v2 };
}

function mac(key: string, t: number, queue: string, id: string, attempt: string, body: Uint8Array): Buffer {
  return createHmac('sha256', key).update(`${t}\n${queue}\n${id}\n${attempt}\n`).update(body).digest();
}

function bytes(body: Uint8Array | string): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
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
  const { t, v2 } = parseSignature(signature);
  if (t === undefined) return false;
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - t) > (options.toleranceSeconds ?? 300)) return false;
  const body = bytes(rawBody);
  // The attempt as a number, as the server signs it (`2`, never `02`).
  const signedAttempt = String(Number(attempt));
  let ok = false;
  for (const key of Array.isArray(keys) ? keys : [keys]) {
    const expected = mac(key, t, queue, id, signedAttempt, body);
    for (const candidate of v2) {
      if (!/^[0-9a-f]{64}$/i.test(candidate)) continue;
      // No early exit: every key and candidate is compared, each in constant time.
      if (timingSafeEqual(expected, Buffer.from(candidate, 'hex'))) ok = true;
    }
  }
  return ok;
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
    const v2 = mac(key, timestamp, signed.queue, signed.id, String(signed.attempt), body).toString('hex');
    value += `,v1=${v1},v2=${v2}`;
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
    // Entries are kept in insertion order, which is expiry order: drop the expired prefix.
    for (const [k, expires] of this.seen) {
      if (expires > nowMs) break;
      this.seen.delete(k);
    }
    const key = `${info.queue}\n${info.id}\n${info.attempt}`;
    if (this.seen.has(key)) return false;
    // Kept twice the tolerance: a timestamp may be up to the tolerance ahead or behind.
    this.seen.set(key, nowMs + 2 * this.toleranceSeconds * 1000);
    return true;
  }
}
