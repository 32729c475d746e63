// The one rule for durations and times, applied to every option that takes one, before any
// request is made.
//
// A bare number is ambiguous across delayq's clients and its HTTP API: `delay: 2` is 2 ms
// to the HTTP API (and to this client before 1.0) but 2 s to the Python client. So a
// duration is text with its unit ("250ms", "2s", "1m30s", "15m", "1d"); a bare number is
// refused with a TypeError that names the fix. 0 alone is taken as a number, since it is
// the same in every unit. A plain number the client takes says its unit in its name
// (`timeoutMs`, `retryBaseMs`), as do the server's answers (`due_ms`).
//
// A time (deliver_at, expires_at, a backfill's range) is a Date or RFC 3339 text; a bare
// number is refused too (is it seconds or milliseconds since the epoch?).
//
// Durations are sent to the server as whole milliseconds, so what reaches it is exactly
// what was checked here.

/** A duration with its unit: `"250ms"`, `"2s"`, `"1m30s"`, `"15m"`, `"1h 30m"`, `"1d"`; or 0. */
export type Duration = string | 0;

/** A point in time: a Date, or RFC 3339 text such as `"2030-01-01T09:00:00Z"`. */
export type Time = Date | string;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** One part: whole number, unit. `ms` is tried before `m` so that "5ms" is not "5m" + "s". */
const PART = /(\d+)\s*(ms|s|m|h|d)(?![a-z])/gy;

/**
 * Milliseconds of a duration given as text with units (`"1m30s"` is 90 000) or as 0.
 * Throws a TypeError naming `field` and the fix for anything else, a bare number above all.
 */
export function durationMs(value: unknown, field = 'duration'): number {
  if (value === 0 || value === '0') return 0;
  if (typeof value === 'number') {
    const n = Number.isFinite(value) ? String(value) : 'N';
    throw new TypeError(
      `${field}: a bare number (${value}) is refused, since delayq's clients read it in different units; ` +
        `give a duration string with its unit, such as '${n}s' or '${n}ms'`,
    );
  }
  if (typeof value !== 'string') {
    throw new TypeError(`${field}: give a duration string such as '30s' or '15m', not ${describe(value)}`);
  }
  const text = value.trim();
  let total = 0;
  let end = 0;
  PART.lastIndex = 0;
  for (let m = PART.exec(text); m !== null; m = PART.exec(text)) {
    total += Number(m[1]) * UNIT_MS[m[2]];
    end = PART.lastIndex;
    // Parts may be separated by spaces: "1h 30m".
    while (text[end] === ' ') end++;
    PART.lastIndex = end;
  }
  if (text.length === 0 || end !== text.length) {
    throw new TypeError(
      `${field}: ${JSON.stringify(value)} is not a duration; give whole numbers with units ms, s, m, h or d, ` +
        `such as '250ms', '2s', '1m30s' or '1d'`,
    );
  }
  if (!Number.isSafeInteger(total)) throw new TypeError(`${field}: ${JSON.stringify(value)} is too long`);
  return total;
}

/** `durationMs` of an optional value: undefined stays undefined (the server's default). */
export function optionalMs(value: unknown, field: string): number | undefined {
  return value === undefined ? undefined : durationMs(value, field);
}

/** `durationMs` of a value that may be `null` (a limit lifted), or undefined (left alone). */
export function nullableMs(value: unknown, field: string): number | null | undefined {
  return value === null ? null : optionalMs(value, field);
}

// RFC 3339: a date, `T` (or a space, as RFC 3339 allows), a time with an optional fraction,
// and `Z` or an offset. The server checks the calendar; this catches what is not a time at all.
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * A time as the API takes it: a Date as Unix milliseconds, RFC 3339 text as it is.
 * Throws a TypeError naming `field` and the fix for anything else, a bare number above all.
 */
export function timeValue(value: unknown, field = 'time'): number | string {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) throw new TypeError(`${field}: an invalid Date`);
    return ms;
  }
  if (typeof value === 'number') {
    throw new TypeError(
      `${field}: a bare number (${value}) is refused (seconds or milliseconds?); ` +
        `give a Date, such as new Date(${value}) for Unix milliseconds, or RFC 3339 text`,
    );
  }
  if (typeof value !== 'string' || !RFC3339.test(value)) {
    throw new TypeError(
      `${field}: give a Date or RFC 3339 text such as '2030-01-01T09:00:00Z', not ${describe(value)}`,
    );
  }
  return value;
}

/** `timeValue` of an optional value. */
export function optionalTime(value: unknown, field: string): number | string | undefined {
  return value === undefined ? undefined : timeValue(value, field);
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null) return 'null';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}
