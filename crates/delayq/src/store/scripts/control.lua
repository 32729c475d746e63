#!lua flags=allow-oom
-- control.lua: changes settings of one partition of a queue (its control hash).
-- Allowed at maxmemory: resuming is how a full queue gets drained again.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: pairs of a setting and its value, '' to clear it:
--   paused     '1': claims take nothing (claim.lua); sends, acks, nacks and extends go on.
--              Clearing it wakes waiting consumers.
--   window_ms  how long (ms) a caller id stays reserved after its message is acked, cancelled
--              or purged (the idempotency window; prelude.lua's remember_gone)
--   rate       this partition's share of the queue's rate limit, messages per second (a
--              decimal); with `burst`, the most tokens its bucket holds (claim.lua). Setting
--              either refills the bucket; clearing `rate` lifts the limit.
--   burst
--   limit      the queue's own limit as '<per second>/<burst>', for stats
--   push       '1': delivered by push; only push claims take from it (claim.lua). Setting or
--              clearing it wakes waiting consumers, the kind that now claims among them.
--   gconc      at most this many messages of one group in flight (groups.lua). A group
--              held back by a lower limit is let in again at its next ack (its slots are
--              counted, not scanned for), so a raised limit reaches it within a lease.
--   ttl_ms     a message without a deadline of its own expires when claimed more than
--              this long after it was due (expiry.lua)
--   on_expire  'drop': an expired message is gone; none: a dead letter (expiry.lua)
--   max_delay_ms  sends due further out than this from now are refused (send.lua)
--   grate      each group's rate limit as '<per second>/<burst>' (groups.lua), unless a
--              group has its own; a group held for it comes back within a second.
--   retain_ms  how long (ms), and retain_max how many, final records of ended messages
--   retain_max the partition keeps (retention.lua); clearing retain_ms drops those kept
--              (UNLINK: freed in the background).
--   events     about how many events the partition's stream keeps (events.lua); clearing it
--              stops them and drops the stream (UNLINK).
--   encrypt    '1': every payload sent here must be sealed (send.lua; src/values/sealing.rs).
--              Refused unless the partition's data is format 7 or later (an older delayq
--              would hand sealed payloads over as they are stored).
-- Returns: how many settings this changed.
check_groups(2, 'control')
local patterns = {
  paused = '^1$', window_ms = '^[1-9]%d*$', rate = '^%d+%.?%d*$', burst = '^[1-9]%d*$',
  limit = '^[1-9]%d*/[1-9]%d*$', push = '^1$', gconc = '^[1-9]%d*$',
  ttl_ms = '^[1-9]%d*$', on_expire = '^drop$', max_delay_ms = '^[1-9]%d*$',
  retain_ms = '^[1-9]%d*$', retain_max = '^[1-9]%d*$', events = '^[1-9]%d*$', encrypt = '^1$',
  grate = '^[1-9]%d?%d?%d?%d?%d?%d?%d?%d?%d?/[1-9]%d?%d?%d?%d?%d?%d?%d?%d?%d?$',
}
-- Every pair is checked before the first write.
for i = 1, #ARGV, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if not patterns[name] then
    error('delayq: no setting ' .. name)
  end
  if value ~= '' and (not value:match(patterns[name]) or (name == 'rate' and tonumber(value) <= 0)) then
    error('delayq: ' .. name .. ' cannot be ' .. value)
  end
  if name == 'encrypt' and value ~= '' then
    local format = tonumber(redis.call('HGET', k.control, 'format') or '1')
    if format < 7 then
      error('delayq: encryption needs data format 7, and this partition is format ' .. format)
    end
  end
end
local changed = 0
for i = 1, #ARGV, 2 do
  if ARGV[i] == 'rate' or ARGV[i] == 'burst' then
    redis.call('HDEL', k.control, 'tokens', 'tokens_at')
  end
end
for i = 1, #ARGV, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if value == '' then
    changed = changed + redis.call('HDEL', k.control, name)
    if name == 'paused' or name == 'rate' or name == 'push' or name == 'gconc' then
      wake()
    end
    if name == 'retain_ms' then
      redis.call('UNLINK', PART_PREFIX .. 'done', PART_PREFIX .. 'done_at')
    end
    if name == 'events' then
      redis.call('UNLINK', EVENTS)
    end
  elseif redis.call('HGET', k.control, name) ~= value then
    redis.call('HSET', k.control, name, value)
    changed = changed + 1
    if name == 'push' then
      wake()
    end
  end
end
return changed
