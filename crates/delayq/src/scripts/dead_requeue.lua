#!lua
-- dead_requeue.lua: moves dead letters back to pending, ready now, with their attempts reset.
-- The last error stays readable through get until the message is acked.
-- Refused at maxmemory: it may add index entries; purge frees memory instead.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV[1]: 'id' then ARGV[2] the message id, or 'oldest' then ARGV[2] how many (at most)
-- Returns: how many were requeued.
local ids = { ARGV[2] }
if ARGV[1] == 'oldest' then
  ids = redis.call('ZRANGE', k.dead, 0, tonumber(ARGV[2]) - 1)
end
local now = now_us()
local old_head = head_due()
local moved = 0
for _, id in ipairs(ids) do
  local rec = redis.call('HGET', k.dead_msgs, id)
  if rec then
    local m = parse(rec)
    m.attempts = 0
    redis.call('ZREM', k.dead, id)
    redis.call('HDEL', k.dead_msgs, id)
    put_pending(m, now)
    moved = moved + 1
  end
end
if moved > 0 then
  wake_for(now, old_head, now)
end
return moved
