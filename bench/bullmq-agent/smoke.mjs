// Smoke test of the BullMQ agent: its own redis-server on a free loopback port, then the
// Agent protocol end to end for W3, W1, W2a, W2b (producer + consumer) and W4 (producer).
// Small sizes, every wait bounded. Run: node smoke.mjs   (exit 0 = pass)

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { delayMs, PAYLOAD_LEN, payload, parsePayload } from './agent.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const AGENT = path.join(HERE, 'agent.js');
const DEADLINE_MS = 60_000;
const children = new Set();
let tmp;
let redis;
let client;

function say(...a) {
  console.log(...a);
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function withDeadline(promise, ms, what) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startRedis() {
  let port;
  do port = await freePort();
  while (port === 6379);
  const proc = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmp],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {});
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      await c.connect();
      await c.ping();
      break;
    } catch (e) {
      if (Date.now() > until) throw new Error(`redis-server on port ${port} did not answer: ${e.message}`);
      c.disconnect();
      await sleep(100);
    }
  }
  return { proc, port, client: c };
}

/** One agent process: its events, its stderr, commands to it. */
class Agent {
  constructor(name, args) {
    this.name = name;
    this.events = [];
    this.waiters = [];
    this.stderr = '';
    this.proc = spawn(process.execPath, [AGENT, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(this.proc);
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        children.delete(this.proc);
        resolve({ code, signal });
      });
    });
    this.proc.stderr.on('data', (d) => (this.stderr += d));
    readline.createInterface({ input: this.proc.stdout }).on('line', (line) => {
      let ev;
      try {
        ev = JSON.parse(line);
      } catch {
        ev = { ev: 'garbage', line };
      }
      this.events.push(ev);
      for (const w of [...this.waiters]) w();
    });
  }

  send(cmd) {
    this.proc.stdin.write(JSON.stringify({ cmd }) + '\n');
  }

  /** The first event matching `pred`; fails on an error event, garbage or the deadline. */
  waitFor(what, pred, ms = DEADLINE_MS) {
    const found = () => {
      const bad = this.events.find((e) => e.ev === 'error' || e.ev === 'garbage');
      if (bad) throw new Error(`${this.name}: ${JSON.stringify(bad)}`);
      return this.events.find(pred);
    };
    return withDeadline(
      new Promise((resolve, reject) => {
        const tryIt = () => {
          try {
            const e = found();
            if (e) {
              this.waiters = this.waiters.filter((w) => w !== tryIt);
              resolve(e);
            }
          } catch (err) {
            reject(err);
          }
        };
        this.waiters.push(tryIt);
        this.exited.then(() => {
          tryIt();
          reject(new Error(`${this.name} exited before ${what}`));
        });
        tryIt();
      }),
      ms,
      `${this.name}: ${what}`,
    );
  }

  waitEv(ev, ms) {
    return this.waitFor(`"${ev}"`, (e) => e.ev === ev, ms);
  }

  async waitExit(ms = DEADLINE_MS) {
    const { code, signal } = await withDeadline(this.exited, ms, `${this.name} to exit`);
    check(code === 0, `${this.name} exited with code ${code} signal ${signal}`);
  }
}

function agentArgs(role, workload, n, extra = []) {
  return ['--role', role, '--workload', workload, '--port', String(redis.port), '--n', String(n), ...extra];
}

function checkReady(ready, name) {
  check(ready.system === 'bullmq', `${name}: ready.system is ${ready.system}`);
  check(/^5\./.test(ready.version), `${name}: ready.version is ${ready.version}`);
  check(ready.config && typeof ready.config === 'object', `${name}: ready has no config`);
}

function checkProduced(p, n, workload) {
  check(p.count === n, `${workload}: produced.count ${p.count} != ${n}`);
  check(p.start_ms <= p.end_ms, `${workload}: produced start_ms > end_ms`);
  check(p.min_due_ms <= p.max_due_ms, `${workload}: produced min_due_ms > max_due_ms`);
  check(p.min_due_ms >= p.start_ms, `${workload}: min_due_ms before start_ms`);
}

function checkDeliveries(file, n, stopped, workload) {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
  check(lines.length === stopped.total, `${workload}: ${lines.length} lines in FILE, stopped.total ${stopped.total}`);
  const seen = new Uint32Array(n);
  let early = 0;
  let maxEarly = 0;
  const lates = [];
  let foreign = 0;
  for (const line of lines) {
    const m = /^(\d+)\t(\d+\.\d{3})\t(\d+\.\d{3})$/.exec(line);
    check(m, `${workload}: bad FILE line ${JSON.stringify(line)}`);
    const seq = Number(m[1]);
    const late = Number(m[3]) - Number(m[2]);
    if (seq >= n) foreign++;
    else seen[seq]++;
    if (late < 0) {
      early++;
      maxEarly = Math.max(maxEarly, -late);
    }
    lates.push(late);
  }
  const missing = [];
  let dups = 0;
  for (let s = 0; s < n; s++) {
    if (seen[s] === 0) missing.push(s);
    else dups += seen[s] - 1;
  }
  check(foreign === 0, `${workload}: ${foreign} deliveries with a seq outside [0, ${n})`);
  check(
    missing.length === 0,
    `${workload}: ${missing.length} of ${n} seqs never delivered (first: ${missing.slice(0, 10).join(',')})`,
  );
  lates.sort((a, b) => a - b);
  const pct = (q) => lates[Math.min(lates.length - 1, Math.ceil(q * lates.length) - 1)].toFixed(1);
  return `${lines.length} deliveries, all ${n} seqs, ${dups} duplicates, ` +
    `lateness p50 ${pct(0.5)} / p99 ${pct(0.99)} / max ${pct(1)} ms, ` +
    `${early} early${early ? ` (max ${maxEarly.toFixed(3)} ms early)` : ''}`;
}

/** Producer + consumer through the protocol. `consumeFirst`: start before production (not W2a). */
async function runConsuming(workload, n, consumeFirst) {
  await client.flushall();
  const t0 = Date.now();
  const file = path.join(tmp, `${workload}.tsv`);
  const consumer = new Agent(`${workload} consumer`, agentArgs('consumer', workload, n, ['--deliveries', file]));
  const producer = new Agent(`${workload} producer`, agentArgs('producer', workload, n, ['--via', 'lib']));
  try {
    checkReady(await consumer.waitEv('ready'), consumer.name);
    checkReady(await producer.waitEv('ready'), producer.name);
    if (consumeFirst) {
      consumer.send('start');
      await consumer.waitEv('started');
    }
    producer.send('produce');
    const produced = await producer.waitEv('produced');
    checkProduced(produced, n, workload);
    if (!consumeFirst) {
      // Nothing may have been taken before `start`.
      const waiting = await client.llen('bull:bench:wait');
      check(waiting === n, `${workload}: ${waiting} jobs waiting before start, expected ${n}`);
      check(!consumer.events.some((e) => e.ev === 'started' || e.ev === 'progress'), `${workload}: consumer active before start`);
      consumer.send('start');
      await consumer.waitEv('started');
    }
    await consumer.waitFor(`progress total >= ${n}`, (e) => e.ev === 'progress' && e.total >= n);
    await sleep(300); // a short grace period for duplicates
    consumer.send('stop');
    const stopped = await consumer.waitEv('stopped');
    await consumer.waitExit();
    producer.send('exit');
    await producer.waitExit();
    const summary = checkDeliveries(file, n, stopped, workload);
    const left = await client.keys('bull:bench:[0-9]*');
    check(left.length === 0, `${workload}: ${left.length} job hashes left in Redis (removeOnComplete?)`);
    say(`ok ${workload} n=${n}: ${summary}; ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } catch (e) {
    for (const a of [consumer, producer]) if (a.stderr) say(`--- ${a.name} stderr:\n${a.stderr.trimEnd()}`);
    throw e;
  }
}

async function runW4(n) {
  await client.flushall();
  const t0 = Date.now();
  const producer = new Agent('W4 producer', agentArgs('producer', 'W4', n, ['--cluster']));
  try {
    checkReady(await producer.waitEv('ready'), producer.name);
    producer.send('produce');
    const produced = await producer.waitEv('produced');
    checkProduced(produced, n, 'W4');
    check(produced.pending_after === n, `W4: pending_after ${produced.pending_after} != ${n}`);
    const due = produced.min_due_ms - produced.start_ms;
    check(Math.abs(due - 3_600_000) < 0.01, `W4: first due is ${due} ms after start, expected 3600000`);
    producer.send('exit');
    await producer.waitExit();
    say(`ok W4 n=${n}: pending_after=${produced.pending_after}; ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  } catch (e) {
    if (producer.stderr) say(`--- ${producer.name} stderr:\n${producer.stderr.trimEnd()}`);
    throw e;
  }
}

function unitChecks() {
  const expect = { 0: 1000, 1: 1253, 2: 1507, 12345: 4678, 99999: 4515 };
  for (const [seq, ms] of Object.entries(expect)) {
    check(delayMs(Number(seq)) === ms, `delay_ms(${seq}) = ${delayMs(Number(seq))}, expected ${ms}`);
  }
  const p = payload(42, 1763805600123.456);
  check(p.length === PAYLOAD_LEN && Buffer.byteLength(p) === PAYLOAD_LEN, 'payload is not 100 bytes');
  check(p.startsWith('42:1763805600123.456:xxx') && /^x+$/.test(p.slice(21)), `bad payload ${p}`);
  const back = parsePayload(p);
  check(back && back.seq === 42 && back.dueMs.toFixed(3) === '1763805600123.456', 'payload does not round-trip');
  check(parsePayload('hello') === null && parsePayload('1:x:y') === null, 'foreign payloads parse');
  say('ok lowbias32 check values, payload format');
}

async function main() {
  unitChecks();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bullmq-agent-smoke-'));
  redis = await startRedis();
  client = redis.client;
  say(`redis-server on 127.0.0.1:${redis.port}`);
  await runConsuming('W3', 50, true);
  await runConsuming('W1', 200, true);
  await runConsuming('W2a', 500, false);
  await runConsuming('W2b', 500, true);
  await runW4(1000);
}

async function cleanup() {
  if (client) client.disconnect();
  for (const c of children) if (c !== redis?.proc) c.kill('SIGKILL');
  if (redis?.proc && children.has(redis.proc)) {
    const exited = new Promise((r) => redis.proc.once('exit', r));
    redis.proc.kill('SIGTERM');
    await withDeadline(exited, 10_000, 'redis-server to exit').catch(() => redis.proc.kill('SIGKILL'));
  }
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}

main().then(
  async () => {
    await cleanup();
    say('smoke: all passed');
    process.exit(0);
  },
  async (e) => {
    console.error(`smoke: FAILED: ${e.message}`);
    await cleanup();
    process.exit(1);
  },
);
