#!lua flags=no-writes
-- stats.lua: counts per state and the lag of the oldest due message nobody has claimed yet.
-- Read-only (no-writes): served at maxmemory.
-- KEYS[1..10]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control
-- ARGV: none
-- Returns: { delayed, ready, in_flight, dead, oldest ready lag ms (0 when none is ready),
--   1 when paused else 0 }
local now = now_us()
local ready = redis.call('ZLEXCOUNT', k.pending, '-', due_bound(now))
local delayed = redis.call('ZCARD', k.pending) - ready
local lag = 0
if ready > 0 then
  lag = to_ms(now - head_due())
end
return { delayed, ready, redis.call('ZCARD', k.leases), redis.call('ZCARD', k.dead), lag,
  redis.call('HEXISTS', k.control, 'paused') }
