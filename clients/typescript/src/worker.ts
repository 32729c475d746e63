// The worker: long-polls a queue, runs a handler on each message with bounded concurrency,
// extends the leases of running handlers, acks on success (with the next receive when that
// starts as the handler ends: one request for both), nacks on failure (retry after a
// given time, or a dead letter now for a PermanentError), and stops gracefully: it stops
// claiming, lets running handlers finish within a grace period, then releases the rest so
// another consumer gets them at once. Each message's outcome is decided once: by its handler
// finishing, its handler_timeout passing, its lease being lost, or the stop's grace ending.

import { DelayqError, LeaseLostError, PermanentError, RetryLaterError } from './errors.js';
import { CallOptions, sleep } from './http.js';
import type { Delivery, Duration, NackOptions, NackResult, ReceiveOptions, Settled } from './types.js';

/**
 * The consume calls a worker makes, as `DelayqClient` offers them. Named here, not taken
 * from the client, so that the worker does not depend on the client that builds it.
 */
export interface ConsumeCalls {
  receive(queue: string, options?: ReceiveOptions, call?: CallOptions): Promise<Delivery[]>;
  ackAndReceive(
    queue: string, receipts: string[], options?: ReceiveOptions, call?: CallOptions,
  ): Promise<{ acked: Settled[]; deliveries: Delivery[] }>;
  ack(queue: string, receipt: string): Promise<void>;
  nack(queue: string, receipt: string, options?: NackOptions): Promise<NackResult>;
  extend(
    queue: string, receipts: string[], options?: { lease?: Duration }, call?: CallOptions,
  ): Promise<Settled[]>;
  release(queue: string, receipts: string[]): Promise<Settled[]>;
}

export interface JobContext {
  /**
   * Aborted when the handler's result no longer counts: its lease was lost (another
   * consumer may have the message), its handler_timeout passed, or the worker's stop grace
   * ran out (the message was released). Pass it to the calls the handler makes.
   */
  signal: AbortSignal;
}

/** Resolves: ack. Throws: nack (PermanentError: dead letter now; RetryLaterError: retry after). */
export type WorkerHandler = (delivery: Delivery, context: JobContext) => unknown;

export interface WorkerOptions {
  /** Handlers running at once (default 1). */
  concurrency?: number;
  /** Lease of each message, ms (default 30 000); extended while its handler runs. */
  leaseMs?: number;
  /** Long-poll wait of each receive, ms (default 10 000; at most the server's --max-wait). */
  waitMs?: number;
  /** How often leases are extended, ms (default a third of the lease). */
  extendEveryMs?: number;
  /** How long stop() lets running handlers finish before releasing them, ms (default 10 000). */
  graceMs?: number;
  /** Longest a handler may run, ms, unless the message has its own handler_timeout. */
  handlerTimeoutMs?: number;
  /** Stop on these signals (true: SIGTERM and SIGINT). Default: none. */
  handleSignals?: boolean | NodeJS.Signals[];
  /** Pause after a failed receive, ms (default 1 000). */
  errorBackoffMs?: number;
  /** Told about failures that are not a handler's (receive, ack, extend). Default: console.error. */
  onError?: (error: unknown, delivery?: Delivery) => void;
}

interface Job {
  delivery: Delivery;
  controller: AbortController;
  /** Set once the outcome is decided: by the handler, a timeout, a lost lease or the stop. */
  decided: boolean;
  /** Local time until which the lease surely holds (renewed by each extend). */
  leaseUntil: number;
  done: Promise<void>;
}

export class Worker {
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly waitMs: number;
  private readonly extendEveryMs: number;
  private readonly graceMs: number;
  private readonly errorBackoffMs: number;
  private readonly jobs = new Set<Job>();
  private state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle';
  private slotFreed?: () => void;
  /** Set while the loop waits for a free slot: the receive it makes next starts at once. */
  private waitingForSlot = false;
  /** Deliveries whose handlers succeeded, acked by that next receive. */
  private carried: Delivery[] = [];
  private poll?: AbortController;
  private loopDone: Promise<void> = Promise.resolve();
  private stopping?: Promise<void>;
  private extendTimer?: ReturnType<typeof setInterval>;
  private extending = false;
  private signals: NodeJS.Signals[] = [];
  private readonly onSignal = () => void this.stop();
  private resolveStopped!: () => void;
  private readonly stopped = new Promise<void>((resolve) => (this.resolveStopped = resolve));

  constructor(
    private readonly client: ConsumeCalls,
    readonly queue: string,
    private readonly handler: WorkerHandler,
    private readonly options: WorkerOptions = {},
  ) {
    this.concurrency = Math.max(1, options.concurrency ?? 1);
    this.leaseMs = options.leaseMs ?? 30_000;
    this.waitMs = options.waitMs ?? 10_000;
    this.extendEveryMs = options.extendEveryMs ?? Math.max(50, Math.floor(this.leaseMs / 3));
    this.graceMs = options.graceMs ?? 10_000;
    this.errorBackoffMs = options.errorBackoffMs ?? 1_000;
  }

  /** Handlers running now. */
  get active(): number {
    return this.jobs.size;
  }

  /** Starts receiving in the background. */
  start(): this {
    if (this.state !== 'idle') throw new Error(`worker is ${this.state}`);
    this.state = 'running';
    this.extendTimer = setInterval(() => void this.extendAll(), this.extendEveryMs);
    const signals = this.options.handleSignals;
    this.signals = signals === true ? ['SIGTERM', 'SIGINT'] : Array.isArray(signals) ? signals : [];
    for (const s of this.signals) process.once(s, this.onSignal);
    this.loopDone = this.loop();
    return this;
  }

  /** Starts (if not started) and resolves once the worker has stopped. */
  run(): Promise<void> {
    if (this.state === 'idle') this.start();
    return this.stopped;
  }

  /**
   * Stops claiming, waits up to `graceMs` for running handlers, then aborts the rest and
   * releases their messages (ready again at once). Resolves when done; repeat calls share it.
   */
  stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.stopping) return this.stopping;
    const graceMs = options.graceMs ?? this.graceMs;
    this.state = 'stopping';
    // The server drops a long-poll whose client goes, so aborting it claims nothing more.
    this.poll?.abort();
    this.slotFreed?.();
    this.stopping = this.shutDown(graceMs);
    return this.stopping;
  }

  private async shutDown(graceMs: number): Promise<void> {
    await this.loopDone;
    await this.ackOnTheirOwn(this.carried.splice(0));
    const running = [...this.jobs];
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finished = await Promise.race([
      Promise.all(running.map((j) => j.done)).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs))),
    ]);
    clearTimeout(timer);
    if (!finished) {
      const unfinished = [...this.jobs].filter((j) => this.decide(j, new Error('worker stopped: message released')));
      if (unfinished.length > 0) {
        try {
          await this.client.release(this.queue, unfinished.map((j) => j.delivery.receipt));
        } catch (error) {
          this.report(error); // they come back when their leases end
        }
      }
    }
    clearInterval(this.extendTimer);
    for (const s of this.signals) process.removeListener(s, this.onSignal);
    this.state = 'stopped';
    this.resolveStopped();
  }

  private async loop(): Promise<void> {
    while (this.state === 'running') {
      if (this.jobs.size >= this.concurrency) {
        this.waitingForSlot = true;
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        this.waitingForSlot = false;
        continue;
      }
      const poll = (this.poll = new AbortController());
      const sentAt = Date.now();
      const acks = this.carried.splice(0);
      const options = { max: this.concurrency - this.jobs.size, lease: this.leaseMs, wait: this.waitMs };
      let deliveries: Delivery[];
      try {
        if (acks.length > 0) {
          const r = await this.client.ackAndReceive(this.queue, acks.map((d) => d.receipt), options, { signal: poll.signal });
          r.acked.forEach((a, i) => {
            if (!a.ok) this.report(new LeaseLostError(409, 'lease_lost', `lease of ${acks[i].id} lost before its ack`), acks[i]);
          });
          deliveries = r.deliveries;
        } else {
          deliveries = await this.client.receive(this.queue, options, { signal: poll.signal });
        }
      } catch (error) {
        // Whether the acks were made is unknown: sent again, on their own.
        await this.ackOnTheirOwn(acks);
        if (this.state !== 'running') break;
        this.report(error);
        await sleep(this.errorBackoffMs, poll.signal);
        continue;
      } finally {
        this.poll = undefined;
      }
      if (this.state !== 'running') {
        // Claimed as the worker stopped: hand them back for another consumer.
        if (deliveries.length > 0) {
          await this.client.release(this.queue, deliveries.map((d) => d.receipt)).catch((e) => this.report(e));
        }
        break;
      }
      let claimedAt = sentAt;
      if (deliveries.length > 0 && Date.now() - sentAt >= this.leaseMs) {
        // The claim happened somewhere in a wait longer than a lease: its lease may have
        // ended (and the message gone to another consumer). Renew before starting.
        claimedAt = Date.now();
        deliveries = await this.renew(deliveries);
      }
      for (const d of deliveries) this.runJob(d, claimedAt);
    }
  }

  /**
   * Acks `deliveries` one by one. One acked already (by a request whose answer was lost)
   * answers lease lost, which is not reported.
   */
  private async ackOnTheirOwn(deliveries: Delivery[]): Promise<void> {
    for (const d of deliveries) {
      await this.client.ack(this.queue, d.receipt).catch((error) => {
        if (!(error instanceof LeaseLostError)) this.report(error, d);
      });
    }
  }

  /** The deliveries whose leases could be extended; the others are Redis's again. */
  private async renew(deliveries: Delivery[]): Promise<Delivery[]> {
    try {
      const results = await this.client.extend(this.queue, deliveries.map((d) => d.receipt), { lease: this.leaseMs });
      return deliveries.filter((_, i) => results[i]?.ok);
    } catch (error) {
      this.report(error);
      return [];
    }
  }

  private runJob(delivery: Delivery, sentAt: number): void {
    const job: Job = {
      delivery, controller: new AbortController(), decided: false, leaseUntil: sentAt + this.leaseMs,
      done: Promise.resolve(),
    };
    this.jobs.add(job);
    const timeoutMs = delivery.handler_timeout_ms ?? this.options.handlerTimeoutMs;
    job.done = (async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const handled = Promise.resolve()
          .then(() => this.handler(delivery, { signal: job.controller.signal }))
          .then(() => ({ ok: true as const }), (error: unknown) => ({ ok: false as const, error }));
        const timedOut = new Promise<{ ok: false; error: Error }>((resolve) => {
          if (timeoutMs !== undefined) {
            timer = setTimeout(() => resolve({ ok: false, error: new Error(`handler timed out after ${timeoutMs} ms`) }), timeoutMs);
          }
        });
        const outcome = await Promise.race([handled, timedOut]);
        if (!this.decide(job, outcome.ok ? undefined : outcome.error)) return;
        // The loop waits for this job's slot: the receive it makes as this job ends acks it.
        if (outcome.ok && this.waitingForSlot && this.state === 'running') this.carried.push(delivery);
        else if (outcome.ok) await this.client.ack(this.queue, delivery.receipt);
        else await this.client.nack(this.queue, delivery.receipt, nackOptions(outcome.error));
      } catch (error) {
        this.report(error, delivery);
      } finally {
        clearTimeout(timer);
        this.jobs.delete(job);
        this.slotFreed?.();
        this.slotFreed = undefined;
      }
    })();
  }

  /** Takes the decision on `job` if nobody has: true for the first caller. */
  private decide(job: Job, reason?: unknown): boolean {
    if (job.decided) return false;
    job.decided = true;
    if (reason !== undefined) job.controller.abort(reason);
    return true;
  }

  /** Extends every undecided job's lease in one call; a job whose lease is lost is aborted. */
  private async extendAll(): Promise<void> {
    if (this.extending) return;
    const jobs = [...this.jobs].filter((j) => !j.decided);
    if (jobs.length === 0) return;
    this.extending = true;
    const sentAt = Date.now();
    try {
      const results = await this.client.extend(
        this.queue, jobs.map((j) => j.delivery.receipt), { lease: this.leaseMs },
        { timeoutMs: Math.max(1_000, this.leaseMs / 3) },
      );
      results.forEach((r, i) => {
        const job = jobs[i];
        if (r.ok) job.leaseUntil = sentAt + this.leaseMs;
        else this.lose(job);
      });
    } catch (error) {
      this.report(error);
      // Unreachable server: a lease not renewed in time is surely gone.
      for (const job of jobs) if (Date.now() >= job.leaseUntil) this.lose(job);
    } finally {
      this.extending = false;
    }
  }

  private lose(job: Job): void {
    const d = job.delivery;
    const error = new LeaseLostError(409, 'lease_lost', `lease of ${d.id} lost; its handler's result will not count`);
    if (this.decide(job, error)) this.report(error, d);
  }

  private report(error: unknown, delivery?: Delivery): void {
    if (this.options.onError) this.options.onError(error, delivery);
    else console.error(`delayq worker (${this.queue})${delivery ? ` message ${delivery.id}` : ''}:`, error);
  }
}

/** How a handler's failure is reported to the server. */
function nackOptions(error: unknown): NackOptions {
  const text = error instanceof Error ? error.message : String(error);
  if (error instanceof PermanentError) return { error: text, dead: true };
  if (error instanceof RetryLaterError) return { error: text, retry_after: Math.max(0, Math.round(error.retryAfterMs)) };
  if (error instanceof DelayqError) return { error: `${error.name}: ${text}` };
  return { error: text || 'failed' };
}
