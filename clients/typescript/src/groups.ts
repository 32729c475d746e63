// Groups (docs/groups.md; role admin, since group names are tenants' names): list a queue's
// groups, read one, and set its own settings in place of the queue's: concurrency, weight,
// rate limit, pause. Reached as `client.groups`.

import { CallOptions, Transport } from './http.js';
import { route } from './routes.js';
import type { RateLimit } from './types.js';

/** One group: what it holds, and its settings. */
export interface GroupInfo {
  name: string;
  delayed: number;
  ready: number;
  in_flight: number;
  paused: boolean;
  /** At most this many of its messages in flight: its own limit, else the queue's (null: none). */
  concurrency: number | null;
  /** Its own limit, if it has one. */
  own_concurrency: number | null;
  /** Messages it gives per turn of the rotation. */
  weight: number;
  /** Its own rate limit, else the queue's `group_rate_limit` (null: none). */
  rate_limit: RateLimit | null;
  own_rate_limit: RateLimit | null;
}

/** A group's settings to change; those left out stay; `null` gives it the queue's again. */
export interface GroupSettings {
  /** At most this many of its messages in flight (1 to 1 000 000). */
  concurrency?: number | null;
  /** Messages it gives per turn (1 to 1 000; `null`: 1). */
  weight?: number | null;
  /** Its messages wait while the rest of the queue flows. */
  paused?: boolean;
  rate_limit?: RateLimit | null;
}

export interface GroupPage {
  /** Groups with messages, in all. */
  total: number;
  /** Most messages first. */
  groups: Array<{ name: string; messages: number }>;
}

export class Groups {
  constructor(private readonly transport: Transport) {}

  /** A page of the queue's groups, most messages first (`limit` 1-1000, default 100). */
  async list(queue: string, page: { offset?: number; limit?: number } = {}, call?: CallOptions): Promise<GroupPage> {
    const r = await this.transport.call<GroupPage>(
      { ...route('GET /v1/queues/{queue}/groups'), params: { queue }, query: page, idempotent: true }, call);
    return r.data;
  }

  /** What one group holds, and its settings. */
  async get(queue: string, group: string, call?: CallOptions): Promise<GroupInfo> {
    const r = await this.transport.call<GroupInfo>(
      { ...route('GET /v1/queues/{queue}/groups/{group}'), params: { queue, group }, idempotent: true }, call);
    return r.data;
  }

  /** Changes the group's own settings, all or none; answers the group. */
  async set(queue: string, group: string, settings: GroupSettings, call?: CallOptions): Promise<GroupInfo> {
    const r = await this.transport.call<GroupInfo>(
      { ...route('PATCH /v1/queues/{queue}/groups/{group}'), params: { queue, group }, body: settings, idempotent: true }, call);
    return r.data;
  }

  /** The group's messages wait while the rest of the queue flows. */
  pause(queue: string, group: string, call?: CallOptions): Promise<GroupInfo> {
    return this.set(queue, group, { paused: true }, call);
  }

  resume(queue: string, group: string, call?: CallOptions): Promise<GroupInfo> {
    return this.set(queue, group, { paused: false }, call);
  }
}
