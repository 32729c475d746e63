// A worker's options: what it receives from (one queue, several in strict order, or by
// weight), and its settings, checked once when it is made. Durations follow duration.ts
// (`lease: '30s'`). Options renamed or removed at 1.0 are refused by name with their
// replacement, so that `leaseMs: 60000` cannot be silently ignored.

import { durationMs } from './duration.js';
import type { Duration } from './types.js';

/** Where a worker receives from: a queue; queues in strict order (the first highest); or by weight. */
export type WorkerSource = string | string[] | { queues: string[] } | { weights: Record<string, number> };

/** Where the worker's failure messages go (`console` fits, as do most loggers). */
export interface Logger {
  error(message: string): void;
}

export interface WorkerOptions {
  /** Handlers running at once (default 1). */
  concurrency?: number;
  /** Lease of each message (default `'30s'`); extended while its handler runs. */
  lease?: Duration;
  /** Long-poll wait of each receive (default `'10s'`; at most the server's --max-wait). */
  wait?: Duration;
  /** How often leases are extended (default a third of the lease). */
  extendEvery?: Duration;
  /** How long stop() lets running handlers finish before releasing them (default `'10s'`). */
  grace?: Duration;
  /** Longest a handler may run, unless the message has its own handler_timeout. */
  handlerTimeout?: Duration;
  /** Stop on these signals (true: SIGTERM and SIGINT). Default: none. */
  handleSignals?: boolean | NodeJS.Signals[];
  /** Pause after a failed receive (default `'1s'`). */
  errorBackoff?: Duration;
  /** Where failures are logged (default `console`): each failed handler with its stack, and
   * errors that are not a handler's when nothing listens to the worker's 'error' event. */
  logger?: Logger;
  /** false: the worker logs nothing (listen to 'failed' and 'error' instead). Default true. */
  logErrors?: boolean;
}

/** The options as the worker uses them: durations in ms, defaults filled in. */
export interface Settings {
  concurrency: number;
  leaseMs: number;
  waitMs: number;
  extendEveryMs: number;
  graceMs: number;
  handlerTimeoutMs?: number;
  signals: NodeJS.Signals[];
  errorBackoffMs: number;
  logger: Logger;
  logErrors: boolean;
}

/** What the worker receives from, as one receive call takes it. */
export type Sources =
  | { kind: 'one'; queues: [string] }
  | { kind: 'strict'; queues: string[] }
  | { kind: 'weighted'; queues: string[]; weights: Record<string, number> };

const RENAMED: Record<string, string> = {
  leaseMs: "lease (a duration string: lease: '30s')",
  waitMs: "wait (a duration string: wait: '10s')",
  extendEveryMs: "extendEvery (a duration string: extendEvery: '10s')",
  graceMs: "grace (a duration string: grace: '10s')",
  handlerTimeoutMs: "handlerTimeout (a duration string: handlerTimeout: '90s')",
  errorBackoffMs: "errorBackoff (a duration string: errorBackoff: '1s')",
  onError: "worker.on('error', (error, delivery) => ...) (and logger / logErrors for the log)",
};

const KNOWN = new Set([
  'concurrency', 'lease', 'wait', 'extendEvery', 'grace', 'handlerTimeout', 'handleSignals', 'errorBackoff',
  'logger', 'logErrors',
]);

/** Checks `options` and fills in the defaults; a TypeError names what is wrong and the fix. */
export function workerSettings(options: WorkerOptions): Settings {
  for (const key of Object.keys(options)) {
    if (key in RENAMED) throw new TypeError(`worker option ${key} was replaced at 1.0: give ${RENAMED[key]}`);
    if (!KNOWN.has(key)) throw new TypeError(`unknown worker option ${key}; the options are ${[...KNOWN].join(', ')}`);
  }
  const concurrency = options.concurrency ?? 1;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new TypeError(`worker option concurrency: give a whole number of 1 or more, not ${concurrency}`);
  }
  const leaseMs = durationMs(options.lease ?? '30s', 'worker option lease');
  const signals = options.handleSignals;
  return {
    concurrency,
    leaseMs,
    waitMs: durationMs(options.wait ?? '10s', 'worker option wait'),
    extendEveryMs: options.extendEvery === undefined
      ? Math.max(50, Math.floor(leaseMs / 3))
      : Math.max(1, durationMs(options.extendEvery, 'worker option extendEvery')),
    graceMs: durationMs(options.grace ?? '10s', 'worker option grace'),
    handlerTimeoutMs: options.handlerTimeout === undefined ? undefined : durationMs(options.handlerTimeout, 'worker option handlerTimeout'),
    signals: signals === true ? ['SIGTERM', 'SIGINT'] : Array.isArray(signals) ? signals : [],
    errorBackoffMs: durationMs(options.errorBackoff ?? '1s', 'worker option errorBackoff'),
    logger: options.logger ?? console,
    logErrors: options.logErrors ?? true,
  };
}

/** The queues of `source`, and how one receive takes them. */
export function sourcesOf(source: WorkerSource): Sources {
  if (typeof source === 'string') return { kind: 'one', queues: [source] };
  const queues = Array.isArray(source) ? source : 'queues' in source ? source.queues : undefined;
  if (queues) {
    if (queues.length === 0) throw new TypeError('a worker needs at least one queue');
    return queues.length === 1 ? { kind: 'one', queues: [queues[0]] } : { kind: 'strict', queues: [...queues] };
  }
  if ('weights' in source && source.weights && Object.keys(source.weights).length > 0) {
    return { kind: 'weighted', queues: Object.keys(source.weights), weights: { ...source.weights } };
  }
  throw new TypeError("a worker receives from a queue name, { queues: [...] } or { weights: { queue: weight } }");
}
