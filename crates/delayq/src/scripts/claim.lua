#!lua
-- claim.lua: the heart of receive. Reclaims expired leases (each counted as a failed attempt),
-- then moves up to `max` due messages from pending to in flight under fresh lease tokens.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV[1] max messages  ARGV[2] lease ms  ARGV[3] random number in [0,1) for backoff jitter
--   ARGV[4] most expired leases to reclaim in this call
-- Returns: { next_event_us, lease_deadline_ms, token before the first, then per message its
--   record as it was pending (message j has token first + j, and this delivery is its
--   attempts + 1) }.
--   next_event_us: when nothing was claimed, microseconds until the next message comes due or
--   the next lease expires (-1: nothing pending or leased); 0 when something was claimed.
local max, lease_ms, rnd = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_us()
local now_ms = to_ms(now)

local expired = redis.call('ZRANGEBYSCORE', k.leases, '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[4]))
for _, member in ipairs(expired) do
  local seq = member:sub(1, 6)
  local v = redis.call('HGET', k.held, seq)
  release_lease(member)
  if v then
    local m = parse_held(seq, v)
    retry_or_bury(m, 'lease expired', backoff_ms(m, rnd), now)
  end
end

local due = redis.call('ZRANGEBYLEX', k.pending, '-', due_bound(now), 'LIMIT', 0, max)
local count = #due
if count == 0 then
  local next_us = head_due()
  local lease = redis.call('ZRANGE', k.leases, 0, 0, 'WITHSCORES')[2]
  if lease and (next_us == nil or tonumber(lease) * 1000 < next_us) then
    next_us = tonumber(lease) * 1000
  end
  if next_us == nil then
    return { -1, 0, 0 }
  end
  return { math.max(next_us - now, 0), 0, 0 }
end

-- The claimed messages are exactly the lowest members, up to the last one taken.
redis.call('ZREMRANGEBYLEX', k.pending, '-', '[' .. due[count])
local first = redis.call('INCRBY', k.seq, count) - count
local deadline = now_ms + lease_ms
-- Bulk arguments as strings: Lua would format a number argument for every element.
local deadline_arg = string.format('%d', deadline)
local out = { 0, deadline, first }
local held, leases = {}, {}
for j = 1, count do
  local rec = due[j]
  local seq = seq_of(rec)
  local token = be6(first + j)
  held[2 * j - 1] = seq
  held[2 * j] = token .. struct.pack('>H', rec:byte(15) * 256 + rec:byte(16) + 1) .. rec
  leases[2 * j - 1] = deadline_arg
  leases[2 * j] = seq .. token
  out[3 + j] = rec
end
redis.call('HSET', k.held, unpack(held))
redis.call('ZADD', k.leases, unpack(leases))
-- Pass the wake-up on: another blocked consumer can take what this call left behind.
local next_due = head_due()
if count == max and next_due and next_due <= now then
  wake()
end
return out
