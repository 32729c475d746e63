// A handle on one queue whose payloads are of one type: `client.queue<Order>('orders')`.
// It names the queue and the payload type once, so sends are checked against `T` and
// deliveries, messages and the worker's handler receive `T`. Each method is the client's
// method of the same name with this queue; nothing is kept beyond the name.

import type { DelayqClient } from './client.js';
import type { CallOptions } from './http.js';
import type {
  BatchMessage, CancelManyResult, DeadLetterPage, Delivery, Duration, MessageInfo, MessagePage, MessageState,
  NackOptions, NackResult, QueueSettings, QueueStats, ReceiveOptions, SendOptions, Sent, Settled, Time,
} from './types.js';
import type { Worker, WorkerHandler, WorkerOptions } from './worker.js';

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
