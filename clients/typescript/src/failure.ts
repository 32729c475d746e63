// How a handler's failure is told: the error text a nack carries (and the worker logs), and
// the nack it becomes. The text's first line is `<ErrorType>: <message>` (the error's
// `name`), the lines after it the stack, then any `cause` the same way, cut to 4 KiB in all
// on a character boundary: the server keeps a message's newest error up to 4 KiB (older
// ones up to 512 bytes), so what a worker sends is what an operator reads in `get`, the
// dashboard and the dead letters (clients/SCENARIOS.md, S9).

import { PermanentError, RetryLaterError } from './errors.js';
import type { NackOptions } from './types.js';

/** The most bytes of error text a nack carries (UTF-8). */
export const MAX_ERROR_BYTES = 4096;

/** Causes followed at most this deep (a cycle stops here too). */
const MAX_CAUSES = 3;

/** `<ErrorType>: <message>`, then the stack's frames, then causes; at most MAX_ERROR_BYTES. */
export function errorText(error: unknown): string {
  return cutUtf8(describeError(error, 0), MAX_ERROR_BYTES);
}

function describeError(error: unknown, depth: number): string {
  if (!(error instanceof Error)) {
    // A thrown string or object: no type and no stack to tell.
    return `Error: ${typeof error === 'string' ? error : safeJson(error)}`;
  }
  const name = error.name || error.constructor?.name || 'Error';
  let text = `${name}: ${error.message}`;
  const frames = stackFrames(error.stack);
  if (frames) text += `\n${frames}`;
  if (error.cause !== undefined && depth < MAX_CAUSES) text += `\nCaused by: ${describeError(error.cause, depth + 1)}`;
  return text;
}

/**
 * The frames of a stack without its header. The header is the type and message as they
 * were when the error was made (a subclass that sets `name` after `super()` shows its
 * base's), so the first line is written from `name` and `message` instead.
 */
function stackFrames(stack: string | undefined): string {
  if (!stack) return '';
  const lines = stack.split('\n');
  const first = lines.findIndex((l) => /^\s+at /.test(l));
  return first < 0 ? '' : lines.slice(first).join('\n');
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** `text` cut to at most `maxBytes` of UTF-8, never inside a character. */
export function cutUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes;
  // bytes[end] is the first byte left out: while it continues a character, that character
  // would be cut, so it is left out whole.
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

/** The nack a failure becomes: dead now (PermanentError), retry after (RetryLaterError), or by backoff. */
export function nackOptionsFor(error: unknown): NackOptions {
  const text = errorText(error);
  if (error instanceof PermanentError) return { error: text, dead: true };
  if (error instanceof RetryLaterError) {
    // A duration string of whole ms, as the rule wants (0 alone is fine as it is).
    const ms = Math.max(0, Math.round(error.retryAfterMs));
    return { error: text, retry_after: ms === 0 ? 0 : `${ms}ms` };
  }
  return { error: text };
}
