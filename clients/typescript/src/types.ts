// The API's JSON shapes (crates/delayq-server/src/api/wire.rs, produce.rs, consume.rs,
// admin.rs, push.rs). Field names are the API's own, snake_case, so the server's README and
// OpenAPI document describe them as they are; only the client's own settings are camelCase.
// Shapes that carry a payload are generic over its type `T` (default `unknown`: narrow it,
// or name it: `client.queue<Order>('orders')`, `client.worker<Order>(...)`).
// Durations and times follow duration.ts: text with a unit, a Date or RFC 3339 text.

import type { Duration, Time } from './duration.js';

export type { Duration, Time };

/** A JSON value (a payload sent as JSON comes back as the same JSON). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Bytes: sent as `payload_base64`, and handed back as bytes (a Buffer) in `payload`. */
export type Bytes = Uint8Array;

/** Retry policy; each takes `jitter_percent` (random shortening, 0-100). */
export type Backoff =
  | { fixed: { delay: Duration; jitter_percent?: number } }
  | { exponential: { base: Duration; cap: Duration; factor?: number; jitter_percent?: number } }
  | { linear: { base: Duration; cap: Duration; jitter_percent?: number } }
  | { list: { delays: Duration[]; jitter_percent?: number } };

/** Every option of a send (`SendBody` in wire.rs, without the payload). */
export interface SendOptions {
  /** Due this long after the server receives it (give this or `deliver_at`, not both). */
  delay?: Duration;
  /** Due at this time. */
  deliver_at?: Time;
  /** The caller's id: makes the send idempotent (a repeat answers `duplicate: true`). */
  id?: string;
  /** Deliveries before it becomes a dead letter (1-65535). */
  max_attempts?: number;
  backoff?: Backoff;
  /** 0 (lowest) to 9 (highest), default 5. */
  priority?: number;
  /** Its group (tenant, customer, order): fairness and per-group concurrency. */
  group?: string;
  /** Never delivered more than this long after it is due (or give `expires_at`). */
  ttl?: Duration;
  /** Never delivered at or after this time. */
  expires_at?: Time;
  /** With an `id` that exists: `keep` (default), `replace` or `debounce` it. */
  on_duplicate?: 'keep' | 'replace' | 'debounce';
  /** A debounce's longest wait after the first send. */
  max_wait?: Duration;
  /** A replace or debounce of a message in flight: `send` (default) or `refuse`. */
  if_in_flight?: 'send' | 'refuse';
  /** How long a worker may spend on it (delivered as `handler_timeout_ms`). */
  handler_timeout?: Duration;
  /** Answer once this many replicas have it (else 503 `not_replicated`). */
  replicas?: { count: number; timeout?: Duration };
  /** On a push queue: this message's own URL (origin allowed by the target) and headers. */
  push?: { url?: string; headers?: Record<string, string> };
  /** W3C trace context handed to whoever handles it. */
  traceparent?: string;
}

/** One message of a batch. */
export interface BatchMessage<T = unknown> extends SendOptions {
  payload: T;
}

export interface Sent {
  id: string;
  due_ms: number | null;
  /** A message with this caller id existed: nothing new was written (unless replaced). */
  duplicate: boolean;
  /** An upsert replaced a message in this state. */
  replaced?: 'delayed' | 'ready' | 'in_flight';
}

/** What `cancelMany` did with each id, in the order given. */
export interface CancelManyResult {
  /** How many were cancelled. */
  cancelled: number;
  results: Array<{
    id: string;
    /** `not_cancelled`: in flight or dead, left alone. */
    outcome: 'cancelled' | 'not_cancelled' | 'not_found';
    /** The state it was in; none when not found. */
    state?: string;
  }>;
}

/**
 * A payload as the client hands it back: `payload` is the JSON sent, or for a message sent
 * as bytes a Buffer of them (the server answers those as `payload_base64`, kept too).
 */
export interface PayloadOut<T = unknown> {
  payload: T;
  /** The payload's bytes in base64, for a message sent as bytes. */
  payload_base64?: string;
  /** The payload is stored encrypted (the queue's `encryption`); older servers omit it. */
  encrypted?: Encrypted;
}

/**
 * A payload stored encrypted at rest: with which key, and whether the payload given is the
 * one sent (`opened`; false in a listing, or when the server lacks the key: `error`).
 */
export interface Encrypted {
  key: string | null;
  opened: boolean;
  error?: string;
}

export interface FailedAttempt {
  attempt: number;
  at_ms: number;
  error: string;
}

export type MessageState = 'delayed' | 'ready' | 'in_flight' | 'dead' | 'completed';

/** A message as `get` answers it. */
export interface MessageInfo<T = unknown> extends PayloadOut<T> {
  id: string;
  state: MessageState;
  due_ms: number;
  attempts: number;
  max_attempts: number;
  priority: number;
  group?: string;
  expires_at_ms?: number;
  debounce_until_ms?: number;
  traceparent?: string;
  last_error: string | null;
  errors: FailedAttempt[];
  lease_deadline_ms?: number;
  died_at_ms?: number;
  outcome?: 'acked' | 'cancelled' | 'expired' | 'dead';
  sent_at_ms?: number;
  first_delivered_at_ms?: number;
  finished_at_ms?: number;
}

/** A received message: settle it by `receipt` at its `queue`. */
export interface Delivery<T = unknown> extends PayloadOut<T> {
  queue: string;
  receipt: string;
  id: string;
  attempt: number;
  priority: number;
  group?: string;
  expires_at_ms?: number;
  due_ms: number;
  lease_deadline_ms: number;
  handler_timeout_ms?: number;
  traceparent?: string;
}

export interface ReceiveOptions {
  /** Most messages (default 1, at most the server's --max-batch). */
  max?: number;
  /** Lease of each (default `'30s'`). */
  lease?: Duration;
  /** Long-poll: longest wait for something to come due (default 0, at most the server's --max-wait). */
  wait?: Duration;
}

export interface ReceiveManyOptions extends ReceiveOptions {
  /** Queues in strict order, the first highest (or give `weights`). */
  queues?: string[];
  /** Queues served in proportion to their weights (or give `queues`). */
  weights?: Record<string, number>;
}

/** One receipt's result when several are settled at once. */
export interface Settled {
  receipt: string;
  ok: boolean;
  lease_deadline_ms?: number;
}

export interface NackOptions {
  /** What went wrong (kept as the message's last error; default "failed"). */
  error?: string;
  /** Retry after this long instead of by the backoff. */
  retry_after?: Duration;
  /** A dead letter now (a permanent failure). */
  dead?: boolean;
  /** New JSON payload for the next attempts. */
  payload?: unknown;
  /** New bytes payload for the next attempts. */
  payload_base64?: string;
  /** Added to the attempts allowed (negative: fewer). */
  extra_attempts?: number;
}

export interface NackResult {
  outcome: 'retry' | 'dead' | 'expired' | 'superseded' | 'settled';
}

export interface RateLimit {
  per_second: number;
  burst?: number;
}

/** What a queue's delete did. */
export interface QueueDeleted {
  queue: string;
  /** Messages deleted with it (0 unless forced). */
  messages: number;
  /** Redis keys deleted. */
  keys: number;
  /** A message sent meanwhile started the queue again. */
  raced: boolean;
}

/** A queue's counts and settings. */
export interface QueueStats {
  name: string;
  delayed: number;
  ready: number;
  in_flight: number;
  dead: number;
  oldest_ready_lag_ms: number;
  /** Of in_flight, held past their lease (their consumer died or stalled); older servers omit it. */
  overdue?: number;
  /** How long ago the oldest overdue lease ended, in ms. */
  oldest_overdue_ms?: number;
  partitions: number;
  paused: boolean;
  idempotency_window_ms: number;
  rate_limit: RateLimit | null;
  data_format: number;
  groups: number;
  group_concurrency: number | null;
  group_rate_limit: RateLimit | null;
  default_ttl_ms: number | null;
  on_expire: 'dead_letter' | 'drop';
  max_delay_ms: number | null;
  completed: number;
  retain_completed: { keep_for_ms: number; max: number } | null;
  events: number;
  events_max: number | null;
  /** Payloads sent are encrypted at rest; older servers omit it. */
  encryption?: boolean;
}

/**
 * Settings to change (`PATCH /v1/queues/{queue}`), each optional (left out: unchanged);
 * `null` lifts a limit or stops a feature.
 */
export interface QueueSettings {
  /** How long a caller id stays reserved after its message is gone (0 turns it off). */
  idempotency_window?: Duration;
  /** At most this many deliveries a second across every consumer. */
  rate_limit?: RateLimit | null;
  /** At most this many messages of one group in flight (1: each group in order). */
  group_concurrency?: number | null;
  /** Each group's own token bucket, unless a group has its own (see `client.groups`). */
  group_rate_limit?: RateLimit | null;
  /** A message without its own deadline is never delivered more than this long after it is due. */
  default_ttl?: Duration | null;
  /** What an expired message becomes. */
  on_expire?: 'dead_letter' | 'drop';
  /** Sends due further out than this are refused. */
  max_delay?: Duration | null;
  /** Keep the final record of each message that ends (`get` answers it as `completed`). */
  retain_completed?: { keep_for: Duration; max: number } | null;
  /** Record events (`client.events`): about `max` per partition (default 20 000). */
  events?: { max?: number } | null;
  /** Encrypt the payloads sent from now on with the server's key (`--keys-file`). */
  encryption?: boolean;
}

export interface DeadLetter<T = unknown> extends PayloadOut<T> {
  id: string;
  died_at_ms: number;
  attempts: number;
  max_attempts: number;
  priority: number;
  last_error: string | null;
  errors: FailedAttempt[];
}

export interface DeadLetterPage<T = unknown> {
  total: number;
  dead_letters: DeadLetter<T>[];
}

/** A message as a list shows it (a preview of its payload). */
export interface MessageSummary {
  id: string;
  state: MessageState;
  due_ms: number;
  attempts: number;
  max_attempts: number;
  priority: number;
  group?: string;
  expires_at_ms?: number;
  last_error: string | null;
  lease_deadline_ms: number | null;
  died_at_ms: number | null;
  outcome?: string;
  finished_at_ms?: number;
  payload_kind: 'json' | 'bytes';
  payload_bytes: number;
  payload_preview: string;
  /** The payload is stored encrypted: a listing never shows it (`opened` is false). */
  encrypted?: Encrypted;
}

export interface MessagePage {
  messages: MessageSummary[];
  scanned: number;
  /** Cursor of the next page; null at the end. */
  next: string | null;
}

/** A push target to set (`PUT /v1/queues/{queue}/push`). */
export interface PushTargetSettings {
  url: string;
  method?: 'POST' | 'PUT' | 'PATCH';
  headers?: Record<string, string>;
  timeout?: Duration;
  concurrency?: number;
  /** Current key first; during a rotation the old one too. Default: kept, or a new one. */
  signing_keys?: string[];
  dead_statuses?: number[];
  failure_callback?: string;
  follow_redirects?: boolean;
  rate_limit?: RateLimit;
  allow_message_urls?: string[];
}

/** A queue's push target as the server keeps it. */
export interface PushTarget {
  url: string;
  method: string;
  headers: Record<string, string>;
  timeout_ms: number;
  concurrency: number;
  /** Verify `Delayq-Signature` with these (see verifyPush). */
  signing_keys: string[];
  dead_statuses: number[] | null;
  failure_callback: string | null;
  follow_redirects: boolean;
  allow_message_urls: string[];
}

/** `GET /readyz`: ready, and the server delayq connected to (a cluster's oldest master). */
export interface Ready {
  status: 'ready';
  server: { kind: 'redis' | 'valkey'; version: string };
}
