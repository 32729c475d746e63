// Recurring schedules (docs/schedules.md; role admin): each tick of a cron expression or an
// interval becomes an ordinary message of the queue (caller id `sched:<name>:<tick ms>`),
// sent by the scheduler every `delayq serve` runs. Reached as `client.schedules`.

import { optionalMs, timeValue } from './duration.js';
import { CallOptions, Transport } from './http.js';
import { route } from './routes.js';
import type { Backoff, Duration, PayloadOut, Time } from './types.js';
import { backoffBody, dropUndefined, payloadFields, withPayload } from './wire.js';

/** When a schedule fires, and the message each tick becomes. Give `cron` or `every`. */
export interface ScheduleSpec<T = unknown> {
  /** A crontab line (`30 9 * * MON-FRI`), one with seconds first, or a nickname (`@daily`). */
  cron?: string;
  /** The IANA time zone `cron` is read in (default `UTC`). */
  time_zone?: string;
  /** Or a fixed period, on a grid from the Unix epoch (`'10m'` fires at :00, :10, ...). */
  every?: Duration;
  /** Ticks missed while no scheduler ran: `skip` (default), `once`, or `all:<n>`. */
  missed?: 'skip' | 'once' | `all:${number}`;
  /** Each tick's payload: JSON, or bytes. */
  payload: T;
  priority?: number;
  max_attempts?: number;
  backoff?: Backoff;
  handler_timeout?: Duration;
  /** Each tick's message is due up to this long after its tick (spreads schedules that share a time). */
  jitter?: Duration;
  /** `skip`: no tick fires while the last one's message is pending or in flight. */
  overlap?: 'allow' | 'skip';
}

/** A schedule as the server keeps it, with its next ticks. */
export interface Schedule<T = unknown> extends PayloadOut<T> {
  name: string;
  cron?: string;
  time_zone?: string;
  every_ms?: number;
  missed: string;
  priority: number;
  max_attempts: number;
  handler_timeout_ms?: number;
  /** When it was created or last replaced (Unix ms). */
  created_ms: number;
  /** The last tick sent as a message. */
  last_tick_ms: number | null;
  /** The next five ticks (Unix ms); while paused, those it would fire once resumed. */
  next_ticks_ms: number[];
  paused: boolean;
  jitter_ms?: number;
  overlap: 'allow' | 'skip';
}

export class Schedules {
  constructor(private readonly transport: Transport) {}

  /** Creates the schedule, or replaces it (it goes on from its last tick; a paused one stays paused). */
  async put<T = unknown>(queue: string, name: string, spec: ScheduleSpec<T>, call?: CallOptions): Promise<Schedule<T>> {
    const { payload, ...rest } = spec;
    const body = dropUndefined({
      ...rest,
      ...payloadFields(payload),
      every: optionalMs(spec.every, 'every'),
      handler_timeout: optionalMs(spec.handler_timeout, 'handler_timeout'),
      jitter: optionalMs(spec.jitter, 'jitter'),
      backoff: backoffBody(spec.backoff),
    });
    const r = await this.transport.call<Schedule<T>>(
      { ...route('PUT /v1/queues/{queue}/schedules/{name}'), params: { queue, name }, body, idempotent: true }, call);
    return withPayload(r.data);
  }

  /** One schedule; NotFoundError if there is none. */
  async get<T = unknown>(queue: string, name: string, call?: CallOptions): Promise<Schedule<T>> {
    const r = await this.transport.call<Schedule<T>>(
      { ...route('GET /v1/queues/{queue}/schedules/{name}'), params: { queue, name }, idempotent: true }, call);
    return withPayload(r.data);
  }

  /** Every schedule of the queue, by name. */
  async list<T = unknown>(queue: string, call?: CallOptions): Promise<Schedule<T>[]> {
    const r = await this.transport.call<{ schedules: Schedule<T>[] }>(
      { ...route('GET /v1/queues/{queue}/schedules'), params: { queue }, idempotent: true }, call);
    return r.data.schedules.map(withPayload);
  }

  /** Deletes it (a tick sent ahead and not yet due is cancelled with it); NotFoundError if there is none. */
  async delete(queue: string, name: string, call?: CallOptions): Promise<void> {
    await this.transport.call(
      { ...route('DELETE /v1/queues/{queue}/schedules/{name}'), params: { queue, name } }, call);
  }

  /** No tick fires until it is resumed. */
  pause<T = unknown>(queue: string, name: string, call?: CallOptions): Promise<Schedule<T>> {
    return this.setPaused<T>(queue, name, true, call);
  }

  /** Fires again; its `missed` policy says which of the ticks it skipped fire now. */
  resume<T = unknown>(queue: string, name: string, call?: CallOptions): Promise<Schedule<T>> {
    return this.setPaused<T>(queue, name, false, call);
  }

  /**
   * Sends each tick from `from` to `to` (inclusive, at most now) that was never sent, due at
   * once; a repeat sends nothing more. At most 1 000 ticks a call.
   */
  async backfill(
    queue: string, name: string, range: { from: Time; to: Time }, call?: CallOptions,
  ): Promise<{ sent: number; already_sent: number }> {
    const body = { from: timeValue(range.from, 'from'), to: timeValue(range.to, 'to') };
    const r = await this.transport.call<{ sent: number; already_sent: number }>(
      // A repeat sends nothing more: safe to retry.
      { ...route('POST /v1/queues/{queue}/schedules/{name}/backfill'), params: { queue, name }, body, idempotent: true }, call);
    return r.data;
  }

  private async setPaused<T>(queue: string, name: string, paused: boolean, call?: CallOptions): Promise<Schedule<T>> {
    const r = await this.transport.call<Schedule<T>>(
      { ...route('PATCH /v1/queues/{queue}/schedules/{name}'), params: { queue, name }, body: { paused }, idempotent: true }, call);
    return withPayload(r.data);
  }
}
