// Queue administration (role admin): stats, creating and configuring queues (every setting
// of PATCH /v1/queues/{queue}), pause and resume, dead letters (list, requeue, purge), push
// targets and event webhooks. Reached as `client.admin`.

import { CallOptions, Transport } from './http.js';
import { route } from './routes.js';
import type {
  DeadLetterPage, PushTarget, PushTargetSettings, QueueDeleted, QueueSettings, QueueStats,
} from './types.js';
import type { EventKind } from './events.js';
import { pushTargetBody, settingsBody, withPayload } from './wire.js';

/** A URL a queue's events are sent to, and the kinds it gets (none: every kind). */
export interface Webhook {
  url: string;
  kinds?: EventKind[];
}

/** A queue's webhooks as the server keeps them. */
export interface Webhooks {
  webhooks: Array<{ url: string; kinds: EventKind[] }>;
  /** Verify each request's `Delayq-Signature` with these (see verifyWebhook). */
  signing_keys: string[];
  /** About how many events each partition keeps: a webhook further behind misses some. */
  events_max: number | null;
}

/** One dead letter by id, or all of them. */
export type Which = { id: string } | { all: true };

export class Admin {
  constructor(private readonly transport: Transport) {}

  /** Every queue with its counts. */
  async queues(call?: CallOptions): Promise<QueueStats[]> {
    const r = await this.transport.call<{ queues: QueueStats[] }>({ ...route('GET /v1/queues'), idempotent: true }, call);
    return r.data.queues;
  }

  /** One queue's counts and settings (all zero for a queue never used). */
  async stats(queue: string, call?: CallOptions): Promise<QueueStats> {
    const r = await this.transport.call<QueueStats>(
      { ...route('GET /v1/queues/{queue}'), params: { queue }, idempotent: true }, call);
    return r.data;
  }

  /** Creates a queue spread over `partitions` (fixed for its life; the same count again is fine). */
  async createQueue(queue: string, options: { partitions: number }, call?: CallOptions): Promise<QueueStats> {
    const r = await this.transport.call<QueueStats>(
      { ...route('PUT /v1/queues/{queue}'), params: { queue }, body: options, idempotent: true }, call);
    return r.data;
  }

  /**
   * Changes settings, all or nothing (those left out stay; `null` lifts a limit); answers
   * the stats, which show them (`idempotency_window_ms`, `rate_limit`, `events_max`, ...).
   */
  async configure(queue: string, settings: QueueSettings, call?: CallOptions): Promise<QueueStats> {
    const r = await this.transport.call<QueueStats>(
      { ...route('PATCH /v1/queues/{queue}'), params: { queue }, body: settingsBody(settings), idempotent: true }, call);
    return r.data;
  }

  /**
   * Deletes the queue: its settings, schedules, events, push target and webhooks. Refused
   * with a ConflictError (409 `queue_not_empty`) while it holds messages, unless `force`,
   * which deletes those too; a NotFoundError for a queue never used.
   */
  async deleteQueue(queue: string, options: { force?: boolean } = {}, call?: CallOptions): Promise<QueueDeleted> {
    const query = options.force ? { force: true } : {};
    const r = await this.transport.call<QueueDeleted>(
      { ...route('DELETE /v1/queues/{queue}'), params: { queue }, query }, call);
    return r.data;
  }

  /** Stops giving messages to consumers (sends still accepted); answers the stats. */
  async pause(queue: string, call?: CallOptions): Promise<QueueStats> {
    // Setting a flag: a repeat changes nothing.
    const r = await this.transport.call<QueueStats>(
      { ...route('POST /v1/queues/{queue}/pause'), params: { queue }, idempotent: true }, call);
    return r.data;
  }

  /** Gives messages to consumers again, waking waiting receives; answers the stats. */
  async resume(queue: string, call?: CallOptions): Promise<QueueStats> {
    const r = await this.transport.call<QueueStats>(
      { ...route('POST /v1/queues/{queue}/resume'), params: { queue }, idempotent: true }, call);
    return r.data;
  }

  /** A page of dead letters, oldest death first, with their error histories. */
  async deadLetters<T = unknown>(
    queue: string, page: { offset?: number; limit?: number } = {}, call?: CallOptions,
  ): Promise<DeadLetterPage<T>> {
    const r = await this.transport.call<DeadLetterPage<T>>(
      { ...route('GET /v1/queues/{queue}/dead'), params: { queue }, query: page, idempotent: true }, call);
    r.data.dead_letters.forEach(withPayload);
    return r.data;
  }

  /** Dead letters back to ready, attempts reset; NotFoundError for an id that is not one. */
  async requeue(queue: string, which: Which, call?: CallOptions): Promise<number> {
    const r = await this.transport.call<{ count: number }>(
      { ...route('POST /v1/queues/{queue}/requeue'), params: { queue }, body: which }, call);
    return r.data.count;
  }

  /** Deletes dead letters; NotFoundError for an id that is not one. */
  async purge(queue: string, which: Which, call?: CallOptions): Promise<number> {
    const r = await this.transport.call<{ count: number }>(
      { ...route('POST /v1/queues/{queue}/purge'), params: { queue }, body: which }, call);
    return r.data.count;
  }

  /** Pushes the queue's messages to a URL (signed); the answer holds the signing keys. */
  async setPushTarget(queue: string, target: PushTargetSettings, call?: CallOptions): Promise<PushTarget> {
    const r = await this.transport.call<PushTarget>(
      { ...route('PUT /v1/queues/{queue}/push'), params: { queue }, body: pushTargetBody(target), idempotent: true }, call);
    return r.data;
  }

  /** The queue's push target; NotFoundError when it has none. */
  async getPushTarget(queue: string, call?: CallOptions): Promise<PushTarget> {
    const r = await this.transport.call<PushTarget>(
      { ...route('GET /v1/queues/{queue}/push'), params: { queue }, idempotent: true }, call);
    return r.data;
  }

  /** Back to pull consumers; NotFoundError when it had no target. */
  async deletePushTarget(queue: string, call?: CallOptions): Promise<void> {
    await this.transport.call({ ...route('DELETE /v1/queues/{queue}/push'), params: { queue } }, call);
  }

  /**
   * Sends the queue's events to these URLs (in place of those it had), signed: verify
   * them with verifyWebhook and the answer's `signing_keys`. Turns the queue's events on.
   */
  async setWebhooks(
    queue: string, webhooks: Webhook[], options: { signing_keys?: string[] } = {}, call?: CallOptions,
  ): Promise<Webhooks> {
    const r = await this.transport.call<Webhooks>(
      { ...route('PUT /v1/queues/{queue}/webhooks'), params: { queue }, body: { webhooks, ...options }, idempotent: true }, call);
    return r.data;
  }

  /** The queue's webhooks and signing keys; NotFoundError when it has none. */
  async getWebhooks(queue: string, call?: CallOptions): Promise<Webhooks> {
    const r = await this.transport.call<Webhooks>(
      { ...route('GET /v1/queues/{queue}/webhooks'), params: { queue }, idempotent: true }, call);
    return r.data;
  }

  /** No more webhook requests (the events stay); NotFoundError when it had none. */
  async deleteWebhooks(queue: string, call?: CallOptions): Promise<void> {
    await this.transport.call({ ...route('DELETE /v1/queues/{queue}/webhooks'), params: { queue } }, call);
  }
}
