#!lua flags=no-writes
-- stats.lua: counts per state and the lag of the oldest due message nobody has claimed yet.
-- Read-only (no-writes): served at maxmemory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: none
-- Returns: { delayed, ready, in_flight, dead, oldest ready lag ms (0 when none is ready),
--   1 when paused else 0, idempotency window ms (0: none), rate limit '<per second>/<burst>'
--   or '', 1 when delivered by push else 0, the data format (none named: 1), groups (with
--   messages pending or in flight), group concurrency (0: none), each group's rate limit
--   '<per second>/<burst>' or '', the default ttl ms (0: none), 1 when expired messages are
--   dropped else 0, the max delay ms (0: none), final records kept (retention.lua), how long
--   ('' when the queue does not retain) and how many at most, events kept (events.lua), how
--   many the partition keeps ('' when it records none), messages in flight past their lease
--   (a claim takes them back; they wait while no consumer claims), how long ago the oldest
--   such lease ended, in ms (0 when none), 1 when payloads are sealed (control.lua's
--   `encrypt`) else 0 }
local now = now_us()
local control = redis.call('HMGET', k.control, 'paused', 'window_ms', 'limit', 'levels', 'push',
  'format', 'gready', 'gconc', 'grate', 'ttl_ms', 'on_expire', 'max_delay_ms', 'retain_ms',
  'retain_max', 'events', 'encrypt')
local prios = priorities(control[4])
local ready, pending = 0, 0
for _, p in ipairs(prios) do
  local set = pending_key(p)
  ready = ready + redis.call('ZLEXCOUNT', set, '-', due_bound(now))
  pending = pending + redis.call('ZCARD', set)
end
local lag = 0
if ready > 0 then
  lag = to_ms(now - earliest_due(prios))
end
-- Messages in buckets (buckets.lua): due ones wait there only while no claim runs.
if redis.call('EXISTS', BUCKET_INDEX) == 1 then
  local bucketed, bucketed_due, earliest = buckets().buckets_due(now)
  pending = pending + bucketed
  ready = ready + bucketed_due
  if earliest then
    lag = math.max(lag, to_ms(now - earliest))
  end
end
-- Grouped messages: those in the groups' sets are ready; gdelayed holds the rest, some of
-- them due already (a claim moves those).
local grouped_due = redis.call('ZLEXCOUNT', groups().gk.delayed, '-', due_bound(now))
local grouped_ready = tonumber(control[7] or '0') + grouped_due
ready = ready + grouped_ready
pending = pending + grouped_ready + redis.call('ZCARD', groups().gk.delayed) - grouped_due
if grouped_due > 0 then
  lag = math.max(lag, to_ms(now - head_due(groups().gk.delayed)))
end
-- Leases that ended: held by a consumer that died or stalled, waiting for a claim.
local now_ms = to_ms(now)
-- A claim's lease (format 6) counts its messages: exactly for the first OVERDUE_EXACT leases
-- that ended, each of the rest as one.
local OVERDUE_EXACT = 1000
local overdue = redis.call('ZCOUNT', k.leases, '-inf', now_ms)
local overdue_ms = 0
if overdue > 0 then
  local ended = redis.call('ZRANGEBYSCORE', k.leases, '-inf', now_ms, 'WITHSCORES', 'LIMIT', 0,
    OVERDUE_EXACT)
  overdue_ms = now_ms - tonumber(ended[2])
  for i = 1, #ended, 2 do
    if #ended[i] == 6 then
      local slots = redis.call('HGET', k.claims, ended[i])
      overdue = overdue + (slots and struct.unpack('>H', slots, 1) or 0) - 1
    end
  end
end
return { pending - ready, ready, redis.call('HLEN', k.held), redis.call('ZCARD', k.dead), lag,
  control[1] and 1 or 0, tonumber(control[2] or '0'), control[3] or '', control[5] and 1 or 0,
  tonumber(control[6] or '1'), redis.call('ZCARD', groups().gk.size), tonumber(control[8] or '0'),
  control[9] or '', tonumber(control[10] or '0'), control[11] and 1 or 0,
  tonumber(control[12] or '0'), redis.call('ZCARD', PART_PREFIX .. 'done_at'), control[13] or '',
  control[14] or '', redis.call('XLEN', EVENTS), control[15] or '', overdue, overdue_ms,
  control[16] and 1 or 0 }
