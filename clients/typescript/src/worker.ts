// The worker: long-polls one queue or several (strict order or weights), runs a handler on
// each message with bounded concurrency, extends the leases of running handlers, acks on
// success (on one queue, with the next receive when that starts as the handler ends: one
// request for both), nacks on failure with the error's type, message and stack (dead now
// for a PermanentError, retry after a time for a RetryLaterError), logs each failure and
// emits 'completed', 'failed' and 'error'. Each message's outcome is decided once: by its
// handler finishing, its handler_timeout passing, its lease being lost, or the stop.
//
// stop() leaves nothing behind: it stops claiming (a receive in flight gets a moment to
// bring back what it claimed, which is released, then is aborted), lets running handlers
// finish within the grace and settles them, releases what is unfinished or unstarted, and
// returns once every call the worker made has ended, its timers cleared. Before 1.0 a lease
// extension in flight could outlive stop() (and be retried), keeping the process alive
// after the program's own end; see the README's "Stopping".

import { EventEmitter } from 'node:events';
import { durationMs } from './duration.js';
import { LeaseLostError, WorkerStoppedError, HandlerTimeoutError } from './errors.js';
import { errorText, nackOptionsFor } from './failure.js';
import { CallOptions, sleep } from './http.js';
import type { Delivery, Duration, NackOptions, NackResult, ReceiveManyOptions, ReceiveOptions, Settled } from './types.js';
import { Settings, Sources, WorkerOptions, WorkerSource, sourcesOf, workerSettings } from './worker-options.js';

export type { Logger, WorkerOptions, WorkerSource } from './worker-options.js';

/**
 * The consume calls a worker makes, as `DelayqClient` offers them. Named here, not taken
 * from the client, so that the worker does not depend on the client that builds it.
 */
export interface ConsumeCalls {
  receive<T>(queue: string, options?: ReceiveOptions, call?: CallOptions): Promise<Delivery<T>[]>;
  ackAndReceive<T>(
    queue: string, receipts: string[], options?: ReceiveOptions, call?: CallOptions,
  ): Promise<{ acked: Settled[]; deliveries: Delivery<T>[] }>;
  receiveMany<T>(options: ReceiveManyOptions, call?: CallOptions): Promise<Delivery<T>[]>;
  ack(queue: string, receipt: string, call?: CallOptions): Promise<void>;
  nack(queue: string, receipt: string, options?: NackOptions, call?: CallOptions): Promise<NackResult>;
  extend(queue: string, receipts: string[], options?: { lease?: Duration }, call?: CallOptions): Promise<Settled[]>;
  release(queue: string, receipts: string[], call?: CallOptions): Promise<Settled[]>;
}

export interface JobContext {
  /**
   * Aborted when the handler's result no longer counts: its lease was lost (another
   * consumer may have the message), its handler_timeout passed, or the worker's stop grace
   * ran out (the message was released). Pass it to the calls the handler makes: a handler
   * that ignores it keeps running (and keeps the process alive) after the worker stopped.
   */
  signal: AbortSignal;
}

/** Resolves: ack. Throws: nack (PermanentError: dead letter now; RetryLaterError: retry after). */
export type WorkerHandler<T = unknown> = (delivery: Delivery<T>, context: JobContext) => unknown;

/** The worker's events and their arguments. */
export interface WorkerEvents<T> {
  /** A handler resolved (`result` is what it resolved to); its ack follows. */
  completed: [delivery: Delivery<T>, result: unknown];
  /** A handler threw or timed out; its nack follows, with the error's text. */
  failed: [delivery: Delivery<T>, error: unknown];
  /** A failure that is not a handler's: a receive, ack, nack, extend or release, or a lease lost. */
  error: [error: unknown, delivery?: Delivery<T>];
}

type Listener<T, E extends keyof WorkerEvents<T>> = (...args: WorkerEvents<T>[E]) => void;

interface Job<T> {
  delivery: Delivery<T>;
  controller: AbortController;
  /** Set once the outcome is decided: by the handler, a timeout, a lost lease or the stop. */
  decided: boolean;
  /** Local time until which the lease surely holds (renewed by each extend). */
  leaseUntil: number;
  /** Aborts the job as lost once only the margin of its lease is left (watchLease). */
  leaseTimer?: ReturnType<typeof setTimeout>;
  done: Promise<void>;
}

/**
 * How long a receive in flight when stop() is called may go on before it is aborted. A
 * receive that finds messages due answers within milliseconds: given this long, what it
 * claimed comes back and is released. Aborted at the moment of its claim, a receive's
 * deliveries would stay in flight, unseen, until their leases end.
 */
const POLL_SETTLE_MS = 200;

/**
 * A handler whose lease could not be extended is aborted once this share of the lease is
 * left, not when an extend finally fails: the server hands the message to another consumer
 * the moment the lease ends, and a busy process acts on its timers late. With extends every
 * third of the lease, a lease still gets two tries at renewal first.
 */
const LEASE_MARGIN = 1 / 5;

export class Worker<T = unknown> extends EventEmitter {
  /** The queues it receives from. */
  readonly queues: readonly string[];
  private readonly settings: Settings;
  private readonly sources: Sources;
  private readonly jobs = new Set<Job<T>>();
  private state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle';
  private slotFreed?: () => void;
  /** Set while the loop waits for a free slot: the receive it makes next starts at once. */
  private waitingForSlot = false;
  /** Deliveries whose handlers succeeded, acked by that next receive (one queue only). */
  private carried: Delivery<T>[] = [];
  private poll?: { controller: AbortController; startedAt: number };
  private pollTimer?: ReturnType<typeof setTimeout>;
  private loopDone: Promise<void> = Promise.resolve();
  private stopping?: Promise<void>;
  private extendTimer?: ReturnType<typeof setInterval>;
  private extending = false;
  /** Aborts the lease extensions in flight when the worker has stopped. */
  private readonly extendAbort = new AbortController();
  /** Calls made outside any job (lease extensions): stop() waits for them. */
  private readonly background = new Set<Promise<unknown>>();
  private readonly onSignal = () => void this.stop();
  private resolveStopped!: () => void;
  private readonly stopped = new Promise<void>((resolve) => (this.resolveStopped = resolve));

  constructor(
    private readonly client: ConsumeCalls,
    source: WorkerSource,
    private readonly handler: WorkerHandler<T>,
    options: WorkerOptions = {},
  ) {
    super();
    this.sources = sourcesOf(source);
    this.queues = this.sources.queues;
    this.settings = workerSettings(options);
  }

  override on<E extends keyof WorkerEvents<T>>(event: E, listener: Listener<T, E>): this {
    return super.on(event, listener as (...args: unknown[]) => void);
  }

  override once<E extends keyof WorkerEvents<T>>(event: E, listener: Listener<T, E>): this {
    return super.once(event, listener as (...args: unknown[]) => void);
  }

  override off<E extends keyof WorkerEvents<T>>(event: E, listener: Listener<T, E>): this {
    return super.off(event, listener as (...args: unknown[]) => void);
  }

  /** Handlers running now. */
  get active(): number {
    return this.jobs.size;
  }

  /** Starts receiving in the background. */
  start(): this {
    if (this.state !== 'idle') throw new Error(`worker is ${this.state}`);
    this.state = 'running';
    this.extendTimer = setInterval(() => this.track(this.extendAll()), this.settings.extendEveryMs);
    for (const s of this.settings.signals) process.once(s, this.onSignal);
    this.loopDone = this.loop();
    return this;
  }

  /** Starts (if not started) and resolves once the worker has stopped. */
  run(): Promise<void> {
    if (this.state === 'idle') this.start();
    return this.stopped;
  }

  /**
   * Stops claiming, waits up to `grace` (default the worker's) for running handlers and
   * settles them, then aborts the rest and releases their messages (ready again at once),
   * as it does anything claimed but not started. Resolves when done, with no call of the
   * worker's still in flight; repeat calls share it.
   */
  stop(options: { grace?: Duration } = {}): Promise<void> {
    if (this.stopping) return this.stopping;
    if ('graceMs' in options) throw new TypeError("stop option graceMs was replaced at 1.0: give grace: '5s'");
    const graceMs = options.grace === undefined ? this.settings.graceMs : durationMs(options.grace, 'stop option grace');
    if (this.state === 'idle') {
      this.state = 'stopped';
      this.resolveStopped();
      return (this.stopping = Promise.resolve());
    }
    this.state = 'stopping';
    this.interruptPoll();
    this.slotFreed?.();
    this.stopping = this.shutDown(graceMs);
    return this.stopping;
  }

  private async shutDown(graceMs: number): Promise<void> {
    await this.loopDone;
    await this.ackOnTheirOwn(this.carried.splice(0));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finished = await Promise.race([
      Promise.all([...this.jobs].map((j) => j.done)).then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs))),
    ]);
    clearTimeout(timer);
    if (!finished) {
      const unfinished = [...this.jobs].filter((j) => this.decide(j, new WorkerStoppedError()));
      await this.releaseAll(unfinished.map((j) => j.delivery));
    }
    clearInterval(this.extendTimer);
    this.extendAbort.abort(new WorkerStoppedError('worker stopped'));
    await Promise.allSettled([...this.background]);
    for (const s of this.settings.signals) process.removeListener(s, this.onSignal);
    this.state = 'stopped';
    this.resolveStopped();
  }

  /** Ends the receive in flight: at once if it is a long poll waiting, else after POLL_SETTLE_MS. */
  private interruptPoll(): void {
    const poll = this.poll;
    if (!poll) return;
    const abort = () => poll.controller.abort(new WorkerStoppedError('worker stopping'));
    const age = Date.now() - poll.startedAt;
    if (age >= POLL_SETTLE_MS) abort();
    else this.pollTimer = setTimeout(abort, POLL_SETTLE_MS - age);
  }

  private async loop(): Promise<void> {
    while (this.state === 'running') {
      if (this.jobs.size >= this.settings.concurrency) {
        this.waitingForSlot = true;
        await new Promise<void>((resolve) => (this.slotFreed = resolve));
        this.waitingForSlot = false;
        continue;
      }
      const controller = new AbortController();
      const sentAt = Date.now();
      this.poll = { controller, startedAt: sentAt };
      const acks = this.carried.splice(0);
      let deliveries: Delivery<T>[];
      try {
        deliveries = await this.receiveSome(this.settings.concurrency - this.jobs.size, acks, controller.signal);
      } catch (error) {
        // Whether the acks were made is unknown: sent again, on their own.
        await this.ackOnTheirOwn(acks);
        if (this.state !== 'running') break;
        this.report(error);
        await sleep(this.settings.errorBackoffMs, controller.signal);
        continue;
      } finally {
        this.poll = undefined;
        clearTimeout(this.pollTimer);
      }
      if (this.state !== 'running') {
        // Claimed as the worker stopped, never started: handed back for another consumer.
        await this.releaseAll(deliveries);
        break;
      }
      let claimedAt = sentAt;
      if (deliveries.length > 0 && Date.now() - sentAt >= this.settings.leaseMs * (1 - LEASE_MARGIN)) {
        // The claim happened somewhere in a wait about as long as a lease: its lease may
        // have ended (and the message gone to another consumer), or be within its margin.
        // Renew before starting.
        claimedAt = Date.now();
        deliveries = await this.renew(deliveries);
      }
      for (const d of deliveries) this.runJob(d, claimedAt);
    }
  }

  /** One receive for `max` messages, carrying `acks` when the worker has one queue. */
  private async receiveSome(max: number, acks: Delivery<T>[], signal: AbortSignal): Promise<Delivery<T>[]> {
    const options = { max, lease: `${this.settings.leaseMs}ms`, wait: `${this.settings.waitMs}ms` };
    const s = this.sources;
    if (s.kind === 'strict') return this.client.receiveMany<T>({ ...options, queues: s.queues }, { signal });
    if (s.kind === 'weighted') return this.client.receiveMany<T>({ ...options, weights: s.weights }, { signal });
    if (acks.length === 0) return this.client.receive<T>(s.queues[0], options, { signal });
    const r = await this.client.ackAndReceive<T>(s.queues[0], acks.map((d) => d.receipt), options, { signal });
    r.acked.forEach((a, i) => {
      if (!a.ok) this.report(new LeaseLostError(409, 'lease_lost', `lease of ${acks[i].id} lost before its ack`), acks[i]);
    });
    return r.deliveries;
  }

  /**
   * Acks `deliveries` one by one. One acked already (by a request whose answer was lost)
   * answers lease lost, which is not reported.
   */
  private async ackOnTheirOwn(deliveries: Delivery<T>[]): Promise<void> {
    for (const d of deliveries) {
      await this.client.ack(d.queue, d.receipt).catch((error) => {
        if (!(error instanceof LeaseLostError)) this.report(error, d);
      });
    }
  }

  /** Hands `deliveries` back, ready at once: one call per queue. */
  private async releaseAll(deliveries: Delivery<T>[]): Promise<void> {
    await Promise.all([...byQueue(deliveries, (d) => d)].map(([queue, ds]) =>
      this.client.release(queue, ds.map((d) => d.receipt)).catch((error) => this.report(error)),
    ));
  }

  /** The deliveries whose leases could be extended; the others are Redis's again. */
  private async renew(deliveries: Delivery<T>[]): Promise<Delivery<T>[]> {
    const kept: Delivery<T>[] = [];
    await Promise.all([...byQueue(deliveries, (d) => d)].map(async ([queue, ds]) => {
      try {
        const results = await this.client.extend(queue, ds.map((d) => d.receipt), { lease: `${this.settings.leaseMs}ms` });
        ds.forEach((d, i) => results[i]?.ok && kept.push(d));
      } catch (error) {
        this.report(error);
      }
    }));
    return kept;
  }

  private runJob(delivery: Delivery<T>, claimedAt: number): void {
    const job: Job<T> = {
      delivery, controller: new AbortController(), decided: false, leaseUntil: claimedAt + this.settings.leaseMs,
      done: Promise.resolve(),
    };
    this.jobs.add(job);
    this.watchLease(job);
    const timeoutMs = delivery.handler_timeout_ms ?? this.settings.handlerTimeoutMs;
    job.done = (async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const handled = Promise.resolve()
          .then(() => this.handler(delivery, { signal: job.controller.signal }))
          .then((result) => ({ ok: true as const, result }), (error: unknown) => ({ ok: false as const, error }));
        const timedOut = new Promise<{ ok: false; error: unknown }>((resolve) => {
          if (timeoutMs !== undefined) {
            timer = setTimeout(() => resolve({ ok: false, error: new HandlerTimeoutError(timeoutMs) }), timeoutMs);
          }
        });
        const outcome = await Promise.race([handled, timedOut]);
        if (!this.decide(job, outcome.ok ? undefined : outcome.error)) return;
        if (outcome.ok) {
          this.emitSafely('completed', delivery, outcome.result);
          // The loop waits for this job's slot: the receive it makes as this job ends acks it.
          if (this.sources.kind === 'one' && this.waitingForSlot && this.state === 'running') this.carried.push(delivery);
          else await this.client.ack(delivery.queue, delivery.receipt);
        } else {
          this.failed(delivery, outcome.error);
          await this.client.nack(delivery.queue, delivery.receipt, nackOptionsFor(outcome.error));
        }
      } catch (error) {
        this.report(error, delivery);
      } finally {
        clearTimeout(timer);
        clearTimeout(job.leaseTimer);
        this.jobs.delete(job);
        this.slotFreed?.();
        this.slotFreed = undefined;
      }
    })();
  }

  /** Takes the decision on `job` if nobody has: true for the first caller. */
  private decide(job: Job<T>, reason?: unknown): boolean {
    if (job.decided) return false;
    job.decided = true;
    if (reason !== undefined) job.controller.abort(reason);
    return true;
  }

  /** Extends every undecided job's lease, one call per queue; a job whose lease is lost is aborted. */
  private async extendAll(): Promise<void> {
    if (this.extending) return;
    const jobs = [...this.jobs].filter((j) => !j.decided);
    if (jobs.length === 0) return;
    this.extending = true;
    const sentAt = Date.now();
    const { leaseMs } = this.settings;
    try {
      await Promise.all([...byQueue(jobs, (j) => j.delivery)].map(async ([queue, js]) => {
        try {
          const results = await this.client.extend(
            queue, js.map((j) => j.delivery.receipt), { lease: `${leaseMs}ms` },
            { timeoutMs: Math.max(1_000, leaseMs / 3), signal: this.extendAbort.signal },
          );
          results.forEach((r, i) => {
            if (!r.ok) return this.lose(js[i]);
            js[i].leaseUntil = sentAt + leaseMs;
            this.watchLease(js[i]);
          });
        } catch (error) {
          if (this.extendAbort.signal.aborted) return;
          // Unreachable server: the job's lease timer aborts it if no later extend gets through.
          this.report(error);
        }
      }));
    } finally {
      this.extending = false;
    }
  }

  /** (Re)arms the timer that aborts `job` as lost once only the margin of its lease is left. */
  private watchLease(job: Job<T>): void {
    clearTimeout(job.leaseTimer);
    const at = job.leaseUntil - this.settings.leaseMs * LEASE_MARGIN;
    job.leaseTimer = setTimeout(() => this.lose(job), Math.max(0, at - Date.now()));
    // A handler that ignores its abort must not keep the process alive through this timer.
    job.leaseTimer.unref?.();
  }

  private lose(job: Job<T>): void {
    const d = job.delivery;
    const error = new LeaseLostError(409, 'lease_lost', `lease of ${d.id} lost; its handler's result will not count`);
    if (this.decide(job, error)) this.report(error, d);
  }

  /** Keeps `call` among those stop() waits for, until it settles. */
  private track(call: Promise<unknown>): void {
    this.background.add(call);
    void call.finally(() => this.background.delete(call));
  }

  /** A handler failed: logged with its stack (unless logErrors is false), and 'failed' emitted. */
  private failed(delivery: Delivery<T>, error: unknown): void {
    if (this.settings.logErrors) {
      this.settings.logger.error(
        `delayq worker: message ${delivery.id} of ${delivery.queue} (attempt ${delivery.attempt}) failed: ${errorText(error)}`,
      );
    }
    this.emitSafely('failed', delivery, error);
  }

  /** A failure that is not a handler's: to the 'error' listeners, or else to the log. */
  private report(error: unknown, delivery?: Delivery<T>): void {
    if (this.listenerCount('error') > 0) this.emitSafely('error', error, delivery);
    else if (this.settings.logErrors) {
      const about = delivery ? ` message ${delivery.id} of ${delivery.queue}` : ` (${this.queues.join(', ')})`;
      this.settings.logger.error(`delayq worker${about}: ${errorText(error)}`);
    }
  }

  /** Emits without letting a listener's throw break the worker's bookkeeping. */
  private emitSafely<E extends keyof WorkerEvents<T>>(event: E, ...args: WorkerEvents<T>[E]): void {
    try {
      this.emit(event, ...args);
    } catch (error) {
      if (this.settings.logErrors) this.settings.logger.error(`delayq worker: a '${event}' listener threw: ${errorText(error)}`);
    }
  }
}

/** `items` by the queue of each one's delivery, in first-seen order. */
function byQueue<I, D extends { queue: string }>(items: I[], delivery: (item: I) => D): Map<string, I[]> {
  const groups = new Map<string, I[]>();
  for (const item of items) {
    const q = delivery(item).queue;
    const list = groups.get(q);
    if (list) list.push(item);
    else groups.set(q, [item]);
  }
  return groups;
}
