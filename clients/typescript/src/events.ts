// A queue's events (docs/events.md): one per change of a message's state, recorded while the
// queue records them (`admin.configure(q, { events: {} })`). `page` reads one JSON page;
// `follow` is an async iterator over them that long-polls page after page, so a `for await`
// loop sees each event as it happens. Every event carries the cursor after it: save it, and
// give it as `from` to go on after a restart. Reached as `client.events`.

import { optionalMs } from './duration.js';
import { CallOptions, Transport, sleep } from './http.js';
import { route } from './routes.js';
import type { Duration } from './types.js';

export type EventKind =
  | 'sent' | 'delivered' | 'acked' | 'retry' | 'released' | 'dead' | 'expired' | 'superseded'
  | 'cancelled' | 'rescheduled' | 'requeued' | 'purged';

/** One change of a message's state (never its payload). */
export interface QueueEvent {
  kind: EventKind;
  /** The message's id. */
  id: string;
  /** When, by the Redis server's clock (Unix ms). */
  at_ms: number;
  /** Of a delivery, its number; of a retry, death or expiry, the attempts made. */
  attempt?: number;
  /** When the message is due: of a send, a retry, a reschedule. */
  due_ms?: number;
  /** The error that ended an attempt (its first 200 bytes). */
  error?: string;
  /** `replaced`, `superseded` or `dropped`. */
  detail?: string;
  /** Where a reader that saw this event goes on from. */
  cursor: string;
}

export interface EventQuery {
  /** `'oldest'` (the oldest kept), `'now'` (default: what happens from now on), or a cursor. */
  from?: string;
  /** Only events of these kinds. */
  kind?: EventKind | EventKind[];
  /** Only events of the message with this id. */
  id?: string;
  /** At most this many events a page (1-1000, default 100). */
  limit?: number;
  /** How long a page waits for a first event (default 0; at most the server's --max-wait). */
  wait?: Duration;
}

export interface EventPage {
  events: QueueEvent[];
  /** Where the next page starts (`from`): after every event this read looked at. */
  cursor: string;
}

export interface FollowOptions extends Omit<EventQuery, 'wait'> {
  /** Each page's long poll (default `'20s'`). */
  wait?: Duration;
  /** Ends the iteration (a `break` out of `for await` does too). */
  signal?: AbortSignal;
}

export class Events {
  constructor(private readonly transport: Transport) {}

  /** One page of the queue's events. */
  async page(queue: string, query: EventQuery = {}, call?: CallOptions): Promise<EventPage> {
    const waitMs = optionalMs(query.wait, 'wait');
    const kind = Array.isArray(query.kind) ? query.kind.join(',') : query.kind;
    const r = await this.transport.call<EventPage>(
      {
        ...route('GET /v1/queues/{queue}/events'), params: { queue },
        query: { from: query.from, kind, id: query.id, limit: query.limit, wait_ms: waitMs },
        idempotent: true, extraTimeoutMs: waitMs,
      },
      call,
    );
    return r.data;
  }

  /**
   * The queue's events from `from` on, as they happen, until `signal` aborts or the loop
   * breaks. A failed page throws out of the loop (resume from the last event's cursor).
   */
  async *follow(queue: string, options: FollowOptions = {}): AsyncGenerator<QueueEvent, void, undefined> {
    const { signal, ...query } = options;
    const wait = query.wait ?? '20s';
    const waitMs = optionalMs(wait, 'wait') ?? 0;
    let from = query.from;
    while (!signal?.aborted) {
      const startedAt = Date.now();
      let page: EventPage;
      try {
        page = await this.page(queue, { ...query, from, wait }, { signal });
      } catch (error) {
        if (signal?.aborted) return;
        throw error;
      }
      for (const event of page.events) yield event;
      // A filtered page answers at once when it found nothing in what it looked at; wait a
      // little before the next, so that following a quiet filter is not a busy loop.
      const quick = Date.now() - startedAt < Math.min(waitMs, 250);
      if (page.events.length === 0 && quick) await sleep(250, signal);
      from = page.cursor;
    }
  }
}
