// The client: producer calls (send, sendBatch, get, cancel, reschedule, listMessages),
// consumer calls (receive, ack, nack, extend, release), probes, and one object per area:
// `admin` (queues, settings, dead letters, push targets, webhooks), `schedules`, `groups`
// and `events`; and `Queue<T>`, the client seen through one queue of one payload type (in
// this file: the handle and the client need each other). Each method is one HTTP call on a route of ROUTES (routes.ts); every
// duration and time goes through duration.ts before the call (wire.ts).

import { Admin } from './admin.js';
import { optionalMs, optionalTime } from './duration.js';
import { Events } from './events.js';
import { Groups } from './groups.js';
import { CallOptions, Transport, TransportOptions } from './http.js';
import { Route, route } from './routes.js';
import { Schedules } from './schedules.js';
import type {
  BatchMessage, CancelManyResult, DeadLetterPage, Delivery, Duration, MessageInfo, MessagePage, MessageState,
  NackOptions, NackResult, QueueSettings, QueueStats, Ready, ReceiveManyOptions, ReceiveOptions, SendOptions, Sent,
  Settled, Time,
} from './types.js';
import { nackBody, receiveBody, sendBody, withPayload } from './wire.js';
import { Worker, WorkerHandler, WorkerOptions, WorkerSource } from './worker.js';

export type ClientOptions = TransportOptions;

export class DelayqClient {
  /** Queue administration (role admin): stats, settings, dead letters, push targets, webhooks. */
  readonly admin: Admin;
  /** Recurring schedules (role admin). */
  readonly schedules: Schedules;
  /** Groups: list them, read one, set its own concurrency, weight, rate limit, pause (role admin). */
  readonly groups: Groups;
  /** A queue's events: a page, or an async iterator that follows them (any role but monitor). */
  readonly events: Events;
  readonly transport: Transport;

  constructor(options: ClientOptions | string) {
    this.transport = new Transport(typeof options === 'string' ? { baseUrl: options } : options);
    this.admin = new Admin(this.transport);
    this.schedules = new Schedules(this.transport);
    this.groups = new Groups(this.transport);
    this.events = new Events(this.transport);
  }

  /** A handle on one queue whose payloads are of type `T`: `client.queue<Order>('orders')`. */
  queue<T = unknown>(name: string): Queue<T> {
    return new Queue<T>(this, name);
  }

  // ---- produce ----

  /**
   * Sends one message: `payload` is any JSON value, or bytes (a Uint8Array or Buffer).
   * Retried on 503 when it has a caller `id` (a repeat is answered as a duplicate).
   */
  async send<T = unknown>(queue: string, payload: T, options: SendOptions = {}, call?: CallOptions): Promise<Sent> {
    const body = sendBody(payload, options);
    const r = await this.transport.call<Sent>(
      { ...route('POST /v1/queues/{queue}/messages'), params: { queue }, body, idempotent: safeToRepeat(options) },
      call,
    );
    return r.data;
  }

  /** Sends up to the server's --max-batch messages, all or nothing. */
  async sendBatch<T = unknown>(queue: string, messages: BatchMessage<T>[], call?: CallOptions): Promise<Sent[]> {
    const body = { messages: messages.map(({ payload, ...options }) => sendBody(payload, options)) };
    const r = await this.transport.call<{ results: Sent[] }>(
      { ...route('POST /v1/queues/{queue}/batch'), params: { queue }, body, idempotent: messages.every(safeToRepeat) },
      call,
    );
    return r.data.results;
  }

  /** A message by id, with its state and error history; NotFoundError if there is none. */
  async get<T = unknown>(queue: string, id: string, call?: CallOptions): Promise<MessageInfo<T>> {
    const r = await this.transport.call<MessageInfo<T>>(
      { ...route('GET /v1/queues/{queue}/messages/{id}'), params: { queue, id }, idempotent: true },
      call,
    );
    return withPayload(r.data);
  }

  /** Cancels a delayed or ready message; WrongStateError (409) if in flight or dead. */
  async cancel(queue: string, id: string, call?: CallOptions): Promise<{ cancelled: boolean; state: string }> {
    const r = await this.transport.call<{ cancelled: boolean; state: string }>(
      { ...route('DELETE /v1/queues/{queue}/messages/{id}'), params: { queue, id } },
      call,
    );
    return r.data;
  }

  /**
   * Cancels many messages by id in one request (up to the server's batch limit), each its own
   * atomic cancel: what became of each, in order (`cancelled`, `not_cancelled` for one in
   * flight or dead, left alone, or `not_found`). Not retried: a repeat would say not_found.
   */
  async cancelMany(queue: string, ids: string[], call?: CallOptions): Promise<CancelManyResult> {
    const r = await this.transport.call<CancelManyResult>(
      { ...route('POST /v1/queues/{queue}/cancel'), params: { queue }, body: { ids } },
      call,
    );
    return r.data;
  }

  /** Moves a pending message's due time: `{delay}` or `{deliver_at}`. */
  async reschedule(
    queue: string, id: string, when: { delay?: Duration; deliver_at?: Time }, call?: CallOptions,
  ): Promise<{ id: string; due_ms: number }> {
    const body = { delay: optionalMs(when.delay, 'delay'), deliver_at: optionalTime(when.deliver_at, 'deliver_at') };
    const r = await this.transport.call<{ id: string; due_ms: number }>(
      // A time is absolute, so repeating it changes nothing; a delay would move it again.
      { ...route('POST /v1/queues/{queue}/messages/{id}/reschedule'), params: { queue, id }, body, idempotent: when.delay === undefined },
      call,
    );
    return r.data;
  }

  /** One page of the messages in a state (`next` is the cursor of the following page). */
  async listMessages(
    queue: string,
    query: { state: MessageState; limit?: number; cursor?: string; contains?: string },
    call?: CallOptions,
  ): Promise<MessagePage> {
    const r = await this.transport.call<MessagePage>(
      { ...route('GET /v1/queues/{queue}/messages'), params: { queue }, query, idempotent: true },
      call,
    );
    return r.data;
  }

  // ---- consume ----

  /** Claims up to `max` due messages under a lease; with `wait`, long-polls until one is due. */
  async receive<T = unknown>(queue: string, options: ReceiveOptions = {}, call?: CallOptions): Promise<Delivery<T>[]> {
    const body = receiveBody(options);
    const r = await this.transport.call<{ deliveries: Delivery<T>[] }>(
      { ...route('POST /v1/queues/{queue}/receive'), params: { queue }, body, extraTimeoutMs: waitOf(body) },
      call,
    );
    return r.data.deliveries.map(withPayload);
  }

  /**
   * Acks `receipts` (deliveries of `queue` this client finished) and receives as
   * `receive` does, in one request: the acks go with the receive's claim, in the same
   * call to Redis (waiting at most 20 ms for it), never after its long poll. `acked` says
   * per receipt, in order, whether it was acked (`ok: false`: its lease was lost, or it
   * was acked before).
   */
  async ackAndReceive<T = unknown>(
    queue: string, receipts: string[], options: ReceiveOptions = {}, call?: CallOptions,
  ): Promise<{ acked: Settled[]; deliveries: Delivery<T>[] }> {
    const body = { ...receiveBody(options), acks: receipts };
    const r = await this.transport.call<{ deliveries: Delivery<T>[]; acked?: Settled[] }>(
      { ...route('POST /v1/queues/{queue}/receive'), params: { queue }, body, extraTimeoutMs: waitOf(body) },
      call,
    );
    return { acked: r.data.acked ?? [], deliveries: r.data.deliveries.map(withPayload) };
  }

  /** One receive over several queues (`queues` in strict order, or `weights`); settle each at its `queue`. */
  async receiveMany<T = unknown>(options: ReceiveManyOptions, call?: CallOptions): Promise<Delivery<T>[]> {
    const body = receiveBody(options);
    const r = await this.transport.call<{ deliveries: Delivery<T>[] }>(
      { ...route('POST /v1/receive'), body, extraTimeoutMs: waitOf(body) },
      call,
    );
    return r.data.deliveries.map(withPayload);
  }

  /** Acks one receipt (LeaseLostError if its lease was lost) or several (a result each). */
  ack(queue: string, receipt: string, call?: CallOptions): Promise<void>;
  ack(queue: string, receipts: string[], call?: CallOptions): Promise<Settled[]>;
  async ack(queue: string, receipts: string | string[], call?: CallOptions): Promise<void | Settled[]> {
    const r = await this.settle('POST /v1/queues/{queue}/ack', queue, receipts, {}, false, call);
    return Array.isArray(r) ? r : undefined;
  }

  /** Hands deliveries back: ready again at once, the attempt not counted. */
  release(queue: string, receipt: string, call?: CallOptions): Promise<void>;
  release(queue: string, receipts: string[], call?: CallOptions): Promise<Settled[]>;
  async release(queue: string, receipts: string | string[], call?: CallOptions): Promise<void | Settled[]> {
    const r = await this.settle('POST /v1/queues/{queue}/release', queue, receipts, {}, false, call);
    return Array.isArray(r) ? r : undefined;
  }

  /** Extends leases to `lease` from now (default `'30s'`); answers the new deadline(s). */
  extend(queue: string, receipt: string, options?: { lease?: Duration }, call?: CallOptions): Promise<{ lease_deadline_ms: number }>;
  extend(queue: string, receipts: string[], options?: { lease?: Duration }, call?: CallOptions): Promise<Settled[]>;
  async extend(
    queue: string, receipts: string | string[], options: { lease?: Duration } = {}, call?: CallOptions,
  ): Promise<{ lease_deadline_ms: number } | Settled[]> {
    const lease = optionalMs(options.lease, 'lease');
    // Extending again only moves the deadline from now: safe to repeat.
    const r = await this.settle('POST /v1/queues/{queue}/extend', queue, receipts, { lease }, true, call);
    return r as { lease_deadline_ms: number } | Settled[];
  }

  /**
   * A failed attempt: retried by backoff, or after `retry_after`; a dead letter after the
   * last attempt, or now with `dead: true`.
   */
  async nack(queue: string, receipt: string, options: NackOptions = {}, call?: CallOptions): Promise<NackResult> {
    const r = await this.transport.call<NackResult>(
      { ...route('POST /v1/queues/{queue}/nack'), params: { queue }, body: nackBody(receipt, options) },
      call,
    );
    return r.data;
  }

  /**
   * A worker that receives from `source` (a queue; `{queues: [...]}` in strict order; or
   * `{weights: {...}}`) and runs `handler` on each message (see worker.ts).
   */
  worker<T = unknown>(source: WorkerSource, handler: WorkerHandler<T>, options?: WorkerOptions): Worker<T> {
    return new Worker<T>(this, source, handler, options);
  }

  // ---- probes and escape hatch ----

  /** `GET /healthz`: the process is up. */
  async health(call?: CallOptions): Promise<{ status: string }> {
    return (await this.transport.call<{ status: string }>({ ...route('GET /healthz'), idempotent: true }, call)).data;
  }

  /** `GET /readyz`: Redis answers (UnavailableError when not), and which server it is. */
  async ready(call?: CallOptions): Promise<Ready> {
    return (await this.transport.call<Ready>({ ...route('GET /readyz'), idempotent: true }, call)).data;
  }

  /** The server's OpenAPI document. */
  async openapi(call?: CallOptions): Promise<{ paths: Record<string, Record<string, unknown>> }> {
    const r = await this.transport.call<{ paths: Record<string, Record<string, unknown>> }>(
      { method: 'GET', path: '/openapi.json', idempotent: true }, call);
    return r.data;
  }

  /**
   * Any route, e.g. one this client leaves out (LEFT_OUT): `raw('GET', '/v1/processes')`.
   * The body goes as given: durations in it are not checked (the API reads a number as ms).
   */
  async raw<T = unknown>(method: string, path: string, body?: unknown, call?: CallOptions): Promise<T> {
    return (await this.transport.call<T>({ method, path, body }, call)).data;
  }

  private async settle(
    r: Route, queue: string, receipts: string | string[], extra: object, idempotent: boolean, call?: CallOptions,
  ): Promise<void | Settled[] | { lease_deadline_ms: number }> {
    const body = Array.isArray(receipts) ? { receipts, ...extra } : { receipt: receipts, ...extra };
    const answer = await this.transport.call<{ results?: Settled[]; lease_deadline_ms?: number } | undefined>(
      { ...route(r), params: { queue }, body, idempotent },
      call,
    );
    if (Array.isArray(receipts)) return answer.data?.results ?? [];
    if (answer.data?.lease_deadline_ms !== undefined) return { lease_deadline_ms: answer.data.lease_deadline_ms };
  }
}

/** A send that a repeat cannot change: it has a caller id and keeps the existing message. */
function safeToRepeat(options: SendOptions): boolean {
  return options.id !== undefined && (options.on_duplicate ?? 'keep') === 'keep';
}

/** A receive body's wait, ms (already checked by receiveBody), added to the call's timeout. */
function waitOf(body: Record<string, unknown>): number {
  return typeof body.wait === 'number' ? body.wait : 0;
}

// A handle on one queue whose payloads are of one type: `client.queue<Order>('orders')`.
// It names the queue and the payload type once, so sends are checked against `T` and
// deliveries, messages and the worker's handler receive `T`. Each method is the client's
// method of the same name with this queue; nothing is kept beyond the name.
export class Queue<T = unknown> {
  constructor(private readonly client: DelayqClient, readonly name: string) {}

  send(payload: T, options?: SendOptions, call?: CallOptions): Promise<Sent> {
    return this.client.send<T>(this.name, payload, options, call);
  }

  sendBatch(messages: BatchMessage<T>[], call?: CallOptions): Promise<Sent[]> {
    return this.client.sendBatch<T>(this.name, messages, call);
  }

  get(id: string, call?: CallOptions): Promise<MessageInfo<T>> {
    return this.client.get<T>(this.name, id, call);
  }

  cancel(id: string, call?: CallOptions): Promise<{ cancelled: boolean; state: string }> {
    return this.client.cancel(this.name, id, call);
  }

  cancelMany(ids: string[], call?: CallOptions): Promise<CancelManyResult> {
    return this.client.cancelMany(this.name, ids, call);
  }

  reschedule(id: string, when: { delay?: Duration; deliver_at?: Time }, call?: CallOptions): Promise<{ id: string; due_ms: number }> {
    return this.client.reschedule(this.name, id, when, call);
  }

  listMessages(query: { state: MessageState; limit?: number; cursor?: string; contains?: string }, call?: CallOptions): Promise<MessagePage> {
    return this.client.listMessages(this.name, query, call);
  }

  receive(options?: ReceiveOptions, call?: CallOptions): Promise<Delivery<T>[]> {
    return this.client.receive<T>(this.name, options, call);
  }

  ackAndReceive(receipts: string[], options?: ReceiveOptions, call?: CallOptions): Promise<{ acked: Settled[]; deliveries: Delivery<T>[] }> {
    return this.client.ackAndReceive<T>(this.name, receipts, options, call);
  }

  ack(receipt: string, call?: CallOptions): Promise<void>;
  ack(receipts: string[], call?: CallOptions): Promise<Settled[]>;
  ack(receipts: string | string[], call?: CallOptions): Promise<void | Settled[]> {
    return Array.isArray(receipts) ? this.client.ack(this.name, receipts, call) : this.client.ack(this.name, receipts, call);
  }

  nack(receipt: string, options?: NackOptions, call?: CallOptions): Promise<NackResult> {
    return this.client.nack(this.name, receipt, options, call);
  }

  extend(receipt: string, options?: { lease?: Duration }, call?: CallOptions): Promise<{ lease_deadline_ms: number }>;
  extend(receipts: string[], options?: { lease?: Duration }, call?: CallOptions): Promise<Settled[]>;
  extend(receipts: string | string[], options?: { lease?: Duration }, call?: CallOptions): Promise<{ lease_deadline_ms: number } | Settled[]> {
    return Array.isArray(receipts)
      ? this.client.extend(this.name, receipts, options, call)
      : this.client.extend(this.name, receipts, options, call);
  }

  release(receipt: string, call?: CallOptions): Promise<void>;
  release(receipts: string[], call?: CallOptions): Promise<Settled[]>;
  release(receipts: string | string[], call?: CallOptions): Promise<void | Settled[]> {
    return Array.isArray(receipts) ? this.client.release(this.name, receipts, call) : this.client.release(this.name, receipts, call);
  }

  /** A worker on this queue whose handler receives `Delivery<T>`. */
  worker(handler: WorkerHandler<T>, options?: WorkerOptions): Worker<T> {
    return this.client.worker<T>(this.name, handler, options);
  }

  stats(call?: CallOptions): Promise<QueueStats> {
    return this.client.admin.stats(this.name, call);
  }

  configure(settings: QueueSettings, call?: CallOptions): Promise<QueueStats> {
    return this.client.admin.configure(this.name, settings, call);
  }

  deadLetters(page?: { offset?: number; limit?: number }, call?: CallOptions): Promise<DeadLetterPage<T>> {
    return this.client.admin.deadLetters<T>(this.name, page, call);
  }
}
