// The HTTP transport: builds the URL from a route template, adds the bearer token, bounds
// each call by a timeout, turns error answers into typed errors, and retries the calls the
// caller marks idempotent when the server answers 503 or cannot be reached.
// Uses only the platform's fetch (Node 18+), so the package has no runtime dependencies.

import {
  ConnectionError, DelayqError, TimeoutError, UnavailableError, errorFromResponse,
} from './errors.js';

/** Options of one call; every client method takes them as its last argument. */
export interface CallOptions {
  /** Give up after this long (default: the client's `timeoutMs`). A long-poll adds its wait. */
  timeoutMs?: number;
  /** Cancels the call. */
  signal?: AbortSignal;
  /** Retries of an idempotent call on 503 or connection failure (default: the client's). */
  retries?: number;
}

export interface TransportOptions {
  /** Base URL of the server, e.g. `http://127.0.0.1:7400`. */
  baseUrl: string;
  /** Bearer token (a `send`, `consume` or `admin` token), when the server has tokens. */
  token?: string;
  /** Default per-call timeout, ms (default 10 000). */
  timeoutMs?: number;
  /** Retries of idempotent calls (default 3). */
  retries?: number;
  /** First retry delay, ms, doubled each retry with jitter (default 100). */
  retryBaseMs?: number;
  /** Called before each retry (for logs and tests). */
  onRetry?: (info: { request: string; attempt: number; delayMs: number; error: DelayqError }) => void;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

export interface Request {
  method: string;
  /** Template with `{name}` parameters, e.g. `/v1/queues/{queue}/messages/{id}`. */
  path: string;
  params?: Record<string, string>;
  query?: Record<string, string | number | boolean | undefined>;
  /** JSON body (sent as application/json). */
  body?: unknown;
  /** Safe to repeat: retried on 503 and connection failures. */
  idempotent?: boolean;
  /** Added to the timeout (a long-poll's wait). */
  extraTimeoutMs?: number;
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  data: T;
}

/**
 * 503 codes that a retry cannot fix (the write happened, the server is too old, or it lacks
 * the queue's encryption key).
 */
const NOT_RETRIED = new Set(['not_replicated', 'newer_data_format', 'no_encryption_key']);

export class Transport {
  readonly baseUrl: string;
  private readonly token?: string;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly retryBaseMs: number;
  private readonly onRetry?: TransportOptions['onRetry'];
  private readonly fetchFn: typeof fetch;

  constructor(options: TransportOptions) {
    if (!options.baseUrl) throw new TypeError('baseUrl is required');
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retries = options.retries ?? 3;
    this.retryBaseMs = options.retryBaseMs ?? 100;
    this.onRetry = options.onRetry;
    this.fetchFn = options.fetch ?? globalThis.fetch;
    if (typeof this.fetchFn !== 'function') throw new TypeError('no fetch: Node 18 or later is needed');
  }

  /** Sends the request, retrying it when it is idempotent and the failure is transient. */
  async call<T>(req: Request, options: CallOptions = {}): Promise<Answer<T>> {
    const retries = req.idempotent ? options.retries ?? this.retries : 0;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(req, options);
      } catch (error) {
        if (!(error instanceof DelayqError) || attempt >= retries || !transient(error)) throw error;
        if (options.signal?.aborted) throw error;
        const delayMs = this.retryBaseMs * 2 ** attempt * (0.5 + Math.random() / 2);
        this.onRetry?.({ request: `${req.method} ${req.path}`, attempt: attempt + 1, delayMs, error });
        await sleep(delayMs, options.signal);
      }
    }
  }

  private async once<T>(req: Request, options: CallOptions): Promise<Answer<T>> {
    const name = `${req.method} ${req.path}`;
    const url = this.url(req);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let body: string | undefined;
    if (req.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    const timeoutMs = (options.timeoutMs ?? this.timeoutMs) + (req.extraTimeoutMs ?? 0);
    const { signal, timedOut, dispose } = deadline(timeoutMs, options.signal);
    try {
      const response = await this.fetchFn(url, { method: req.method, headers, body, signal });
      const text = await response.text();
      let data: unknown = undefined;
      if (text.length > 0) {
        try {
          data = JSON.parse(text);
        } catch {
          data = text; // a proxy's HTML error page, /metrics text: kept as text
        }
      }
      if (!response.ok) throw errorFromResponse(response.status, data, name);
      return { status: response.status, headers: response.headers, data: data as T };
    } catch (error) {
      if (error instanceof DelayqError) throw error;
      if (timedOut()) {
        throw new TimeoutError(0, 'timeout', `${name}: no answer within ${timeoutMs} ms`, name, { cause: error });
      }
      if (options.signal?.aborted) throw options.signal.reason ?? error;
      throw new ConnectionError(0, 'connection_failed', `${name}: ${describe(error)}`, name, { cause: error });
    } finally {
      dispose();
    }
  }

  private url(req: Request): string {
    const path = req.path.replace(/\{(\w+)\}/g, (_, key: string) => {
      const value = req.params?.[key];
      if (value === undefined) throw new TypeError(`${req.path}: missing ${key}`);
      // Ids may hold `/`, `:` and `@`: encoded, they stay one path segment.
      return encodeURIComponent(value);
    });
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) query.set(k, String(v));
    const qs = query.toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ''}`;
  }
}

/** Transient failures: worth retrying when the call is idempotent. */
function transient(error: DelayqError): boolean {
  if (error instanceof ConnectionError) return true;
  return error instanceof UnavailableError && !NOT_RETRIED.has(error.code);
}

/** A signal that aborts after `ms` or when `outer` aborts; `timedOut` tells which. */
function deadline(ms: number, outer?: AbortSignal) {
  const controller = new AbortController();
  let expired = false;
  const timer = setTimeout(() => {
    expired = true;
    controller.abort();
  }, ms);
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) onAbort();
  else outer?.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    timedOut: () => expired,
    dispose: () => {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    },
  };
}

/** Waits `ms`, or less if `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
  if (cause?.code) return `${cause.code} ${cause.message ?? ''}`.trim();
  return error instanceof Error ? error.message : String(error);
}
