#!/usr/bin/env node
// BullMQ agent for delayq-bench: the "Agent protocol" of WORKLOADS.md (shared/bench).
//
//   node agent.js --role producer --workload W --port P --n N
//   node agent.js --role consumer --workload W --port P --n N --deliveries FILE
//
// Events go to stdout, one JSON object per line; commands come from stdin, one JSON object
// per line; everything else (logs, BullMQ's own warnings) goes to stderr.

import fs from 'node:fs';
import readline from 'node:readline';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Queue, Worker } from 'bullmq';

// ---------------------------------------------------------------------------------------------
// Clock: performance.now() plus an offset taken once, at the edge of a Date.now() ms tick.

const CLOCK_OFFSET_MS = (() => {
  const d0 = Date.now();
  let d = d0;
  while (d === d0) d = Date.now();
  return d - performance.now();
})();

/** Wall-clock ms since the Unix epoch, as a float with sub-ms resolution. */
export function nowMs() {
  return performance.now() + CLOCK_OFFSET_MS;
}

// ---------------------------------------------------------------------------------------------
// Workload definitions (WORKLOADS.md).

export const WORKLOADS = ['W1', 'W2a', 'W2b', 'W3', 'W4'];
export const PAYLOAD_LEN = 100;
export const BATCH_SIZE = 1000;
export const W3_INTERVAL_MS = 5;
export const W3_DELAY_MS = 500;
export const W4_DELAY_MS = 3_600_000;

/** lowbias32 on uint32, wrapping. */
export function lowbias32(x) {
  x >>>= 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return x >>> 0;
}

/** W1's delay of message `seq`: integer ms in [1000, 6000]. */
export function delayMs(seq) {
  return 1000 + (lowbias32(seq) % 5001);
}

/** The delay (ms) a workload asks for message `seq`; 0 = immediate path (option omitted). */
export function workloadDelay(workload, seq) {
  switch (workload) {
    case 'W1':
      return delayMs(seq);
    case 'W3':
      return W3_DELAY_MS;
    case 'W4':
      return W4_DELAY_MS;
    default:
      return 0;
  }
}

const PAD = 'x'.repeat(PAYLOAD_LEN);

/** `<seq>:<due_ms with 3 decimals>:` padded with 'x' to exactly 100 ASCII bytes. */
export function payload(seq, dueMs) {
  const head = `${seq}:${dueMs.toFixed(3)}:`;
  if (head.length > PAYLOAD_LEN) {
    throw new Error(`payload header of seq ${seq} is longer than ${PAYLOAD_LEN} bytes`);
  }
  return head + PAD.slice(head.length);
}

/** `{seq, dueMs}` back out of a payload, or null if it is not one of ours. */
export function parsePayload(p) {
  if (typeof p !== 'string') return null;
  const i = p.indexOf(':');
  if (i <= 0) return null;
  const j = p.indexOf(':', i + 1);
  if (j < 0) return null;
  const seqText = p.slice(0, i);
  if (!/^\d+$/.test(seqText)) return null;
  const seq = Number(seqText);
  const dueMs = Number(p.slice(i + 1, j));
  if (!Number.isSafeInteger(seq) || !Number.isFinite(dueMs) || i + 1 === j) return null;
  return { seq, dueMs };
}

// ---------------------------------------------------------------------------------------------
// Configuration (all of it is reported in `ready`).

const QUEUE_NAME = 'bench';
const JOB_NAME = 'm';
const PREFIX = 'bull'; // BullMQ's default key prefix, spelled out
// Worker concurrency: BullMQ's guide ("Parallelism and Concurrency") calls 100–300 a quite
// standard setting for jobs that do I/O; our handler does none, but BullMQ's own completion
// path (moveToFinished + fetch of the next job) is a Redis round trip per job, so this is the
// number of those round trips kept in flight. The low end of the documented range.
const CONCURRENCY = 100;
const PROGRESS_EVERY_MS = 500;
const CONNECT_TIMEOUT_MS = 30_000;
const JOB_OPTS = { removeOnComplete: true, removeOnFail: true };

// ---------------------------------------------------------------------------------------------
// Protocol plumbing.

function emit(event) {
  // Writes to a pipe are synchronous on Linux: the line is out when this returns.
  process.stdout.write(JSON.stringify(event) + '\n');
}

function log(...args) {
  process.stderr.write(`[bullmq-agent ${new Date().toISOString()}] ${args.join(' ')}\n`);
}

let fatalReported = false;
function fatal(err) {
  const msg = err instanceof Error ? err.message || String(err) : String(err);
  if (!fatalReported) {
    fatalReported = true;
    log('fatal:', err instanceof Error && err.stack ? err.stack : msg);
    emit({ ev: 'error', msg });
  }
  process.exit(1);
}

/** Commands from stdin; `next()` yields null once stdin is closed. */
class Commands {
  constructor() {
    this.buffered = [];
    this.waiters = [];
    this.closed = false;
    const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    rl.on('line', (line) => {
      const text = line.trim();
      if (!text) return;
      let cmd;
      try {
        cmd = JSON.parse(text).cmd;
      } catch {
        cmd = undefined;
      }
      if (typeof cmd !== 'string') {
        log(`ignoring a stdin line that is not a command: ${JSON.stringify(text)}`);
        return;
      }
      this.push(cmd);
    });
    rl.on('close', () => {
      this.closed = true;
      for (const w of this.waiters.splice(0)) w(null);
    });
  }

  push(cmd) {
    const w = this.waiters.shift();
    if (w) w(cmd);
    else this.buffered.push(cmd);
  }

  next() {
    if (this.buffered.length) return Promise.resolve(this.buffered.shift());
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Waits for one of `wanted` (others are logged and skipped); null at end of input. */
  async waitFor(wanted) {
    for (;;) {
      const cmd = await this.next();
      if (cmd === null || wanted.includes(cmd)) return cmd;
      log(`ignoring command ${JSON.stringify(cmd)} here (waiting for one of ${wanted.join(', ')})`);
    }
  }
}

const KNOWN_FLAGS = ['--role', '--workload', '--port', '--n', '--deliveries'];

export function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    let flag = arg;
    let value;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 2) {
      flag = arg.slice(0, eq);
      value = arg.slice(eq + 1);
    }
    if (KNOWN_FLAGS.includes(flag)) {
      if (value === undefined) {
        if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
        value = argv[++i];
      }
      opts[flag.slice(2)] = value;
    } else if (flag.startsWith('--')) {
      // Unknown flag (e.g. the driver's --via/--http-port/--cluster): a following token that
      // is not itself a flag is taken as its value.
      if (value === undefined && i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
        value = argv[++i];
      }
      log(`note: ignoring unknown flag ${flag}${value === undefined ? '' : ` ${value}`}`);
    } else {
      log(`note: ignoring stray argument ${JSON.stringify(arg)}`);
    }
  }
  if (opts.role !== 'producer' && opts.role !== 'consumer') {
    throw new Error(`--role must be producer or consumer (got ${JSON.stringify(opts.role)})`);
  }
  if (!WORKLOADS.includes(opts.workload)) {
    throw new Error(
      `--workload must be one of ${WORKLOADS.join(' ')} (got ${JSON.stringify(opts.workload)})`,
    );
  }
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error(`--port must be a TCP port (got ${JSON.stringify(opts.port)})`);
  }
  const n = Number(opts.n);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new Error(`--n must be a non-negative integer (got ${JSON.stringify(opts.n)})`);
  }
  if (opts.role === 'consumer' && !opts.deliveries) {
    throw new Error('--deliveries FILE is required for a consumer');
  }
  return { role: opts.role, workload: opts.workload, port, n, deliveries: opts.deliveries };
}

function bullmqVersion() {
  const url = new URL('./node_modules/bullmq/package.json', import.meta.url);
  try {
    return JSON.parse(fs.readFileSync(url, 'utf8')).version;
  } catch (e) {
    log(`cannot read the bullmq version: ${e.message}`);
    return 'unknown';
  }
}

function ioredisVersion() {
  const url = new URL('./node_modules/ioredis/package.json', import.meta.url);
  try {
    return JSON.parse(fs.readFileSync(url, 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Producer.

async function runProducer(args, commands) {
  const bulk = args.workload !== 'W3';
  const connection = {
    host: '127.0.0.1',
    port: args.port,
    maxRetriesPerRequest: null,
    // BullMQ's "Going to production": Queue calls should fail fast while Redis is away.
    enableOfflineQueue: false,
  };
  const queue = new Queue(QUEUE_NAME, {
    connection,
    prefix: PREFIX,
    defaultJobOptions: JOB_OPTS,
  });
  queue.on('error', (err) => log('queue error:', err?.message ?? err));
  await withTimeout(queue.waitUntilReady(), CONNECT_TIMEOUT_MS, 'connecting to Redis');

  const delay =
    args.workload === 'W1'
      ? 'delay_ms(seq) (1000 + lowbias32(seq) mod 5001)'
      : args.workload === 'W3'
        ? W3_DELAY_MS
        : args.workload === 'W4'
          ? W4_DELAY_MS
          : 'omitted (immediate path)';
  const config = {
    queue: QUEUE_NAME,
    prefix: PREFIX,
    job_name: JOB_NAME,
    bulk_api: bulk,
    ...(bulk
      ? {
          api: 'Queue.addBulk (one ioredis pipeline of add-job Lua script calls per batch)',
          batch_size: BATCH_SIZE,
          bulk_calls_in_flight: 1,
        }
      : {
          api: 'Queue.add (one call at a time, awaited)',
          pipelined: false,
          pacing_ms: W3_INTERVAL_MS,
        }),
    delay_ms: delay,
    job_opts: { ...JOB_OPTS, via: 'Queue defaultJobOptions' },
    data: 'the 100-byte payload string (BullMQ stores it JSON-encoded)',
    connection,
    ioredis: ioredisVersion(),
    node: process.version,
  };
  emit({ ev: 'ready', system: 'bullmq', version: bullmqVersion(), config });

  const cmd = await commands.waitFor(['produce', 'exit']);
  if (cmd === 'produce') {
    const produced = bulk
      ? await produceBulk(queue, args.workload, args.n)
      : await producePaced(queue, args.n);
    if (args.workload === 'W4') {
      produced.pending_after = await queue.getDelayedCount();
    }
    log(`produced ${JSON.stringify(produced)}`);
    emit({ ev: 'produced', ...produced });
    await commands.waitFor(['exit']);
  }
  await queue.close();
}

/** W1, W2a, W2b, W4: batches of 1000 through addBulk, one call in flight at a time. */
async function produceBulk(queue, workload, n) {
  let startMs = null;
  let minDue = Infinity;
  let maxDue = -Infinity;
  for (let seq = 0; seq < n; ) {
    const end = Math.min(seq + BATCH_SIZE, n);
    // One t_send per batch, read before the batch is built; every message uses it.
    const tSend = nowMs();
    if (startMs === null) startMs = tSend;
    const jobs = new Array(end - seq);
    for (let s = seq; s < end; s++) {
      const delay = workloadDelay(workload, s);
      const due = tSend + delay;
      if (due < minDue) minDue = due;
      if (due > maxDue) maxDue = due;
      jobs[s - seq] =
        delay > 0
          ? { name: JOB_NAME, data: payload(s, due), opts: { delay } }
          : { name: JOB_NAME, data: payload(s, due) };
    }
    const added = await queue.addBulk(jobs);
    if (added.length !== jobs.length) {
      throw new Error(`addBulk of ${jobs.length} jobs returned ${added.length}`);
    }
    seq = end;
  }
  return produced(startMs, n, minDue, maxDue);
}

/** The `produced` event's fields, once the last enqueue was acknowledged. */
function produced(startMs, n, minDue, maxDue) {
  const endMs = nowMs();
  return {
    start_ms: startMs ?? endMs,
    end_ms: endMs,
    count: n,
    min_due_ms: n ? minDue : endMs,
    max_due_ms: n ? maxDue : endMs,
  };
}

/** W3: one add per message at T0 + seq × 5 ms; a late send goes at once, no catch-up burst. */
async function producePaced(queue, n) {
  let startMs = null;
  let minDue = Infinity;
  let maxDue = -Infinity;
  const t0 = performance.now();
  for (let seq = 0; seq < n; seq++) {
    const wait = t0 + seq * W3_INTERVAL_MS - performance.now();
    if (wait > 0) await sleep(Math.ceil(wait));
    const tSend = nowMs();
    if (startMs === null) startMs = tSend;
    const due = tSend + W3_DELAY_MS;
    if (due < minDue) minDue = due;
    if (due > maxDue) maxDue = due;
    await queue.add(JOB_NAME, payload(seq, due), { delay: W3_DELAY_MS });
  }
  return produced(startMs, n, minDue, maxDue);
}

// ---------------------------------------------------------------------------------------------
// Consumer.

async function runConsumer(args, commands) {
  // One record per handler invocation, kept as three parallel arrays of numbers.
  const seqs = [];
  const dues = [];
  const starts = [];
  let total = 0;
  let badPayloads = 0;

  // "Ack immediately": clock first, parse, log, return; BullMQ completes the job.
  const handler = async (job) => {
    const startMs = nowMs();
    const p = parsePayload(job.data);
    total++;
    if (p === null) {
      badPayloads++;
      return;
    }
    seqs.push(p.seq);
    dues.push(p.dueMs);
    starts.push(startMs);
  };

  const connection = { host: '127.0.0.1', port: args.port, maxRetriesPerRequest: null };
  const worker = new Worker(QUEUE_NAME, handler, {
    connection,
    prefix: PREFIX,
    concurrency: CONCURRENCY,
    autorun: false, // nothing is taken before `start`
  });
  worker.on('error', (err) => log('worker error:', err?.message ?? err));
  worker.on('failed', (job, err) => log(`job ${job?.id} failed:`, err?.message ?? err));
  await withTimeout(worker.waitUntilReady(), CONNECT_TIMEOUT_MS, 'connecting to Redis');

  const o = worker.opts;
  const config = {
    queue: QUEUE_NAME,
    prefix: PREFIX,
    runtime: 'bullmq Worker (async processor in-process, autorun: false, run() on start)',
    concurrency: CONCURRENCY,
    job_opts: { ...JOB_OPTS, via: "set on every job by the producer's Queue defaultJobOptions" },
    ack: "processor resolves; BullMQ's moveToFinished completes (and removes) the job and fetches the next",
    // BullMQ defaults, read back from the Worker, recorded so a change of default shows.
    drainDelay_s: o.drainDelay,
    lockDuration_ms: o.lockDuration,
    stalledInterval_ms: o.stalledInterval,
    maxStalledCount: o.maxStalledCount,
    connection: { ...connection, blocking_connection: 'a second one, made by the Worker (BullMQ default)' },
    ioredis: ioredisVersion(),
    node: process.version,
  };
  emit({ ev: 'ready', system: 'bullmq', version: bullmqVersion(), config });

  let cmd = await commands.waitFor(['start', 'stop']);
  if (cmd === 'start') {
    let stopping = false;
    const running = worker.run();
    running.catch((err) => {
      if (!stopping) fatal(new Error(`worker stopped unasked: ${err?.message ?? err}`));
    });
    emit({ ev: 'started', t_ms: nowMs() });
    const tick = setInterval(
      () => emit({ ev: 'progress', total, t_ms: nowMs() }),
      PROGRESS_EVERY_MS,
    );
    cmd = await commands.waitFor(['stop']);
    if (cmd === null) log('stdin closed: stopping');
    stopping = true;
    // No new jobs; waits for the handlers in flight to finish and be completed.
    await worker.close();
    await running.catch(() => {});
    clearInterval(tick);
  } else {
    if (cmd === null) log('stdin closed before start');
    await worker.close();
  }

  writeDeliveries(args.deliveries, seqs, dues, starts);
  const stopped = { ev: 'stopped', total, t_ms: nowMs() };
  if (badPayloads > 0) stopped.bad_payloads = badPayloads;
  log(`stopped: ${total} deliveries, ${badPayloads} bad payloads`);
  emit(stopped);
}

/** One line per handler invocation: `seq<TAB>due_ms<TAB>start_ms`, ms with 3 decimals. */
function writeDeliveries(file, seqs, dues, starts) {
  const fd = fs.openSync(file, 'w');
  try {
    let chunk = [];
    for (let i = 0; i < seqs.length; i++) {
      chunk.push(`${seqs[i]}\t${dues[i].toFixed(3)}\t${starts[i].toFixed(3)}\n`);
      if (chunk.length === 10_000) {
        fs.writeSync(fd, chunk.join(''));
        chunk = [];
      }
    }
    if (chunk.length) fs.writeSync(fd, chunk.join(''));
  } finally {
    fs.closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  // Nothing but protocol lines may reach stdout: any library console output goes to stderr.
  console.log = console.error;
  console.info = console.error;
  console.debug = console.error;
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', (reason) => fatal(reason instanceof Error ? reason : new Error(String(reason))));
  const args = parseArgs(process.argv.slice(2));
  log(`starting: ${JSON.stringify(args)}`);
  const commands = new Commands();
  // SIGINT/SIGTERM: the graceful path (consumer: stop; producer: exit); twice: leave at once.
  let signalled = false;
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      if (signalled) process.exit(1);
      signalled = true;
      log(`${sig}: shutting down`);
      commands.push(args.role === 'consumer' ? 'stop' : 'exit');
    });
  }
  if (args.role === 'producer') await runProducer(args, commands);
  else await runConsumer(args, commands);
  process.exit(0);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === fs.realpathSync(process.argv[1])) {
  main().catch(fatal);
}
