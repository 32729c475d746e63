// Waiting on conditions with a deadline, never a fixed sleep: polls `check` until it answers
// something truthy, and fails with `what` when the deadline passes.

export async function waitFor(check, { what = 'condition', timeoutMs = 10_000, intervalMs = 20 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await new Promise((ok) => setTimeout(ok, intervalMs));
  }
}

/** A promise with its resolve function, for events a test waits on. */
export function signal() {
  let resolve;
  const promise = new Promise((ok) => (resolve = ok));
  return { promise, resolve };
}

/** `promise`, or a rejection naming `what` after `timeoutMs`. */
export function within(promise, timeoutMs, what) {
  let timer;
  const timeout = new Promise((_, fail) => {
    timer = setTimeout(() => fail(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

let counter = 0;
/** A queue name no other test uses. */
export function uniqueQueue(prefix = 'q') {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${counter++}`;
}
