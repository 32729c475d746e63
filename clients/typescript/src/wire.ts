// Between the client's options and the API's JSON: every duration goes through duration.ts
// (refused before any request if it is a bare number or not a duration, sent as whole ms),
// every time is checked, a bytes payload travels as base64, and answers get their bytes
// back as a Buffer in `payload`. Kept in one place so that no option skips the rule.

import { durationMs, nullableMs, optionalMs, optionalTime } from './duration.js';
import type { Backoff, Bytes, NackOptions, PushTargetSettings, QueueSettings, ReceiveOptions, SendOptions } from './types.js';

/** The payload fields of a body: JSON as `payload`, bytes as `payload_base64`. */
export function payloadFields(payload: unknown): { payload?: unknown; payload_base64?: string } {
  if (payload instanceof Uint8Array) return { payload_base64: Buffer.from(payload).toString('base64') };
  if (payload === undefined) throw new TypeError('payload: give a JSON value or bytes (undefined is neither)');
  return { payload };
}

/** A send's JSON body: the payload and the options, durations in ms, times checked. */
export function sendBody(payload: unknown, options: SendOptions): Record<string, unknown> {
  return dropUndefined({
    ...options,
    ...payloadFields(payload),
    delay: optionalMs(options.delay, 'delay'),
    deliver_at: optionalTime(options.deliver_at, 'deliver_at'),
    ttl: optionalMs(options.ttl, 'ttl'),
    expires_at: optionalTime(options.expires_at, 'expires_at'),
    max_wait: optionalMs(options.max_wait, 'max_wait'),
    handler_timeout: optionalMs(options.handler_timeout, 'handler_timeout'),
    backoff: backoffBody(options.backoff),
    replicas: options.replicas && dropUndefined({
      count: options.replicas.count,
      timeout: optionalMs(options.replicas.timeout, 'replicas.timeout'),
    }),
  });
}

/** A retry policy with its delays in ms. */
export function backoffBody(backoff: Backoff | undefined): unknown {
  if (backoff === undefined) return undefined;
  if ('fixed' in backoff) {
    return { fixed: { ...backoff.fixed, delay: durationMs(backoff.fixed.delay, 'backoff.fixed.delay') } };
  }
  if ('exponential' in backoff) {
    const e = backoff.exponential;
    return { exponential: { ...e, base: durationMs(e.base, 'backoff.exponential.base'), cap: durationMs(e.cap, 'backoff.exponential.cap') } };
  }
  if ('linear' in backoff) {
    const l = backoff.linear;
    return { linear: { ...l, base: durationMs(l.base, 'backoff.linear.base'), cap: durationMs(l.cap, 'backoff.linear.cap') } };
  }
  if ('list' in backoff) {
    const delays = backoff.list.delays.map((d, i) => durationMs(d, `backoff.list.delays[${i}]`));
    return { list: { ...backoff.list, delays } };
  }
  // An unknown shape: the server says what is wrong with it (400 malformed_json).
  return backoff;
}

/** A receive's options with lease and wait in ms. */
export function receiveBody(options: ReceiveOptions): Record<string, unknown> {
  return dropUndefined({ ...options, lease: optionalMs(options.lease, 'lease'), wait: optionalMs(options.wait, 'wait') });
}

/** A nack's body (the payload as JSON or bytes, `retry_after` in ms). */
export function nackBody(receipt: string, options: NackOptions): Record<string, unknown> {
  const { payload, ...rest } = options;
  return dropUndefined({
    receipt,
    ...rest,
    ...(payload === undefined ? {} : payloadFields(payload)),
    retry_after: optionalMs(options.retry_after, 'retry_after'),
  });
}

/** Queue settings with their durations in ms (`null` kept: it lifts a limit). */
export function settingsBody(settings: QueueSettings): Record<string, unknown> {
  const retain = settings.retain_completed;
  return dropUndefined({
    ...settings,
    idempotency_window: optionalMs(settings.idempotency_window, 'idempotency_window'),
    default_ttl: nullableMs(settings.default_ttl, 'default_ttl'),
    max_delay: nullableMs(settings.max_delay, 'max_delay'),
    retain_completed: retain ? { ...retain, keep_for: durationMs(retain.keep_for, 'retain_completed.keep_for') } : retain,
  });
}

/** A push target with its timeout in ms. */
export function pushTargetBody(target: PushTargetSettings): Record<string, unknown> {
  return dropUndefined({ ...target, timeout: optionalMs(target.timeout, 'timeout') });
}

/**
 * An answer that carries a payload, with bytes handed back as bytes: the server answers a
 * bytes payload as `payload_base64`, which becomes a Buffer in `payload` (base64 kept).
 */
export function withPayload<R>(answer: R): R {
  const a = answer as { payload?: unknown; payload_base64?: unknown };
  if (a && typeof a === 'object' && typeof a.payload_base64 === 'string' && a.payload === undefined) {
    a.payload = Buffer.from(a.payload_base64, 'base64') as Bytes;
  }
  return answer;
}

/** `o` without its undefined fields (JSON would drop them too; this keeps bodies readable in tests). */
export function dropUndefined<O extends Record<string, unknown>>(o: O): O {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}
