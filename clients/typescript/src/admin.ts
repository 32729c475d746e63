// Queue administration (role admin): stats, creating and configuring queues, pause and
// resume, dead letters (list, requeue, purge) and push targets. Reached as `client.admin`.

import { CallOptions, Transport } from './http.js';
import { route } from './routes.js';
import type {
  DeadLetterPage, PushTarget, PushTargetSettings, QueueDeleted, QueueSettings, QueueStats,
} from './types.js';

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

  /** Changes settings (all or nothing); answers the stats. */
  async configure(queue: string, settings: QueueSettings, call?: CallOptions): Promise<QueueStats> {
    const r = await this.transport.call<QueueStats>(
      { ...route('PATCH /v1/queues/{queue}'), params: { queue }, body: settings, idempotent: true }, call);
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
  async deadLetters(queue: string, page: { offset?: number; limit?: number } = {}, call?: CallOptions): Promise<DeadLetterPage> {
    const r = await this.transport.call<DeadLetterPage>(
      { ...route('GET /v1/queues/{queue}/dead'), params: { queue }, query: page, idempotent: true }, call);
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
      { ...route('PUT /v1/queues/{queue}/push'), params: { queue }, body: target, idempotent: true }, call);
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
}
