// What push and webhook signatures share (crates/delayq-server/src/push/signature.rs): the
// `Delayq-Signature: t=<unix s>,v1=<hex>,v2=<hex>[,w1=<hex>]` header, read from any kind of
// headers, and a constant-time check of an HMAC-SHA256 against the header's signatures of
// one version, with the time within a tolerance of now.

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

/** The value of header `name` (lowercase) in `headers`. */
export function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(',') : v;
  }
  return undefined;
}

/** The header's time, and its signatures of `version` (`v2`, `w1`). */
export function parseSignature(value: string, version: string): { t?: number; signatures: string[] } {
  let t: number | undefined;
  const signatures: string[] = [];
  for (const part of value.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const val = part.slice(eq + 1).trim();
    if (key === 't' && /^\d+$/.test(val)) t = Number(val);
    else if (key === version) signatures.push(val);
  }
  return { t, signatures };
}

export function bytes(body: Uint8Array | string): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
}

/** HMAC-SHA256 under `key` of `prefix` then `body`. */
export function mac(key: string, prefix: string, body: Uint8Array): Buffer {
  return createHmac('sha256', key).update(prefix).update(body).digest();
}

/**
 * True when `signatureHeader` has a signature of `version` equal to `expected(key, t)` for
 * one of `keys`, with `t` within the tolerance of now. Compares every key and candidate,
 * each in constant time.
 */
export function verifySignature(
  signatureHeader: string,
  version: string,
  keys: string | string[],
  expected: (key: string, t: number) => Buffer,
  options: VerifyOptions,
): boolean {
  const { t, signatures } = parseSignature(signatureHeader, version);
  if (t === undefined) return false;
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - t) > (options.toleranceSeconds ?? 300)) return false;
  let ok = false;
  for (const key of Array.isArray(keys) ? keys : [keys]) {
    const want = expected(key, t);
    for (const candidate of signatures) {
      if (!/^[0-9a-f]{64}$/i.test(candidate)) continue;
      // No early exit: every key and candidate is compared.
      if (timingSafeEqual(want, Buffer.from(candidate, 'hex'))) ok = true;
    }
  }
  return ok;
}
