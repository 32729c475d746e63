// Typed errors. Every error the server answers is `{"error": {"code", "message"}}` with an
// HTTP status; each becomes a DelayqError subclass chosen by status and code, so callers can
// `catch (e) { if (e instanceof LeaseLostError) ... }` or switch on `e.code`.
// Client-side failures (timeout, connection refused) are DelayqErrors too, with status 0.
// PermanentError and RetryLaterError are thrown by worker handlers, not by the client;
// HandlerTimeoutError and WorkerStoppedError are why a worker aborts a handler's signal.

import { Duration, durationMs } from './duration.js';

/** The stable codes the server uses (crates/delayq-server/src/error.rs and api/). */
export type KnownErrorCode =
  // 400: the request is wrong in a way the caller must fix
  | 'malformed_json' | 'invalid_query' | 'invalid_path' | 'invalid_queue_name' | 'invalid_id'
  | 'invalid_group' | 'invalid_receipt' | 'invalid_schedule' | 'invalid_option'
  | 'invalid_payload' | 'invalid_duration' | 'invalid_time' | 'invalid_cursor'
  | 'invalid_push_target' | 'push_target_refused' | 'push_url_not_allowed'
  | 'invalid_webhook' | 'webhook_refused' | 'over_limit' | 'empty_batch' | 'bad_body'
  // 401/403: tokens and browser protections
  | 'unauthorized' | 'forbidden' | 'host_not_allowed' | 'cross_origin'
  // 404, 405
  | 'not_found' | 'no_route' | 'method_not_allowed'
  // 408, 409, 413, 415
  | 'body_timeout' | 'lease_lost' | 'wrong_state' | 'queue_not_empty' | 'older_data_format' | 'older_processes'
  | 'body_too_large' | 'batch_too_large' | 'payload_too_large' | 'unsupported_media_type'
  // 5xx
  | 'unavailable' | 'redis_full' | 'not_replicated' | 'newer_data_format' | 'internal'
  | 'no_encryption_key' | 'encryption_changed'
  // client side (status 0)
  | 'timeout' | 'connection_failed' | 'bad_response';

/** A known code, or any other string a newer server may answer. */
export type ErrorCode = KnownErrorCode | (string & {});

/** Base class of every error the client raises. */
export class DelayqError extends Error {
  /** HTTP status (0 when no answer came: timeout, connection failure). */
  readonly status: number;
  /** Stable machine-readable code. */
  readonly code: ErrorCode;
  /** `METHOD path` of the request that failed. */
  readonly request?: string;

  constructor(status: number, code: ErrorCode, message: string, request?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.request = request;
  }
}

/** 400: bad input (`invalid_*`, `malformed_json`, `over_limit`, ...). */
export class BadRequestError extends DelayqError {}
/** 401: no token, or an unknown one. */
export class UnauthorizedError extends DelayqError {}
/** 403: the token's role does not allow the route (or a browser protection refused it). */
export class ForbiddenError extends DelayqError {}
/** 404: no such message, dead letter, push target or route. */
export class NotFoundError extends DelayqError {}
/** 409: the request conflicts with the message's state. */
export class ConflictError extends DelayqError {}
/** 409 `lease_lost`: the receipt's lease ran out or was settled; the message is not yours. */
export class LeaseLostError extends ConflictError {}
/** 409 `wrong_state`: e.g. cancelling a message in flight or dead. */
export class WrongStateError extends ConflictError {}
/** 413: body, batch or payload over a limit. */
export class PayloadTooLargeError extends DelayqError {}
/** 503: Redis did not answer in time, is full, or a replica did not confirm. */
export class UnavailableError extends DelayqError {}
/** Any other status (405, 408, 415, 500, ...). */
export class ServerError extends DelayqError {}
/** The call did not finish within its timeout (status 0, code `timeout`). */
export class TimeoutError extends DelayqError {}
/** The server could not be reached (status 0, code `connection_failed`). */
export class ConnectionError extends DelayqError {}

/** The error for an answer with a non-2xx status and its (parsed, if JSON) body. */
export function errorFromResponse(status: number, body: unknown, request: string): DelayqError {
  const detail = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const code = typeof detail?.code === 'string' ? detail.code : `http_${status}`;
  const message = typeof detail?.message === 'string' ? detail.message : `HTTP ${status}`;
  const text = `${request}: ${status} ${code}: ${message}`;
  if (code === 'lease_lost') return new LeaseLostError(status, code, text, request);
  if (code === 'wrong_state') return new WrongStateError(status, code, text, request);
  switch (status) {
    case 400: return new BadRequestError(status, code, text, request);
    case 401: return new UnauthorizedError(status, code, text, request);
    case 403: return new ForbiddenError(status, code, text, request);
    case 404: return new NotFoundError(status, code, text, request);
    case 409: return new ConflictError(status, code, text, request);
    case 413: return new PayloadTooLargeError(status, code, text, request);
    case 503: return new UnavailableError(status, code, text, request);
    default: return new ServerError(status, code, text, request);
  }
}

/**
 * Thrown by a worker handler: the message fails for good and becomes a dead letter now,
 * whatever attempts it has left (nack with `dead: true`).
 */
export class PermanentError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PermanentError';
  }
}

/**
 * Thrown by a worker handler: retry after `retryAfter` (a duration such as `'30s'`) instead
 * of by the message's backoff.
 */
export class RetryLaterError extends Error {
  readonly retryAfterMs: number;
  constructor(message: string, retryAfter: Duration, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RetryLaterError';
    this.retryAfterMs = durationMs(retryAfter, 'RetryLaterError retryAfter');
  }
}

/** A handler ran past its message's handler_timeout (or the worker's): the attempt failed. */
export class HandlerTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`handler timed out after ${timeoutMs} ms`);
    this.name = 'HandlerTimeoutError';
  }
}

/** A handler's signal aborts with this when the worker's stop grace ran out: its message was released. */
export class WorkerStoppedError extends Error {
  constructor(message = 'worker stopped: message released') {
    super(message);
    this.name = 'WorkerStoppedError';
  }
}
