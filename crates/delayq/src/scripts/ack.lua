#!lua
-- ack.lua: completes deliveries; the message is gone for good.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV: per delivery a pair: id, lease token
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired; nothing changed).
local now_ms = to_ms(now_us())
local ids = {}
for i = 1, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
end
-- One read of each structure for the whole batch.
local held = redis.call('HMGET', k.held, unpack(ids))
local deadlines = redis.call('ZMSCORE', k.leases, unpack(ids))
local out, done = {}, {}
for j, id in ipairs(ids) do
  local v, deadline = held[j], tonumber(deadlines[j])
  if v and deadline and deadline > now_ms and unbe6(v, 1) == tonumber(ARGV[2 * j]) then
    done[#done + 1] = id
    out[j] = 1
  else
    out[j] = 0
  end
end
if #done > 0 then
  redis.call('ZREM', k.leases, unpack(done))
  redis.call('HDEL', k.held, unpack(done))
  if redis.call('HLEN', k.errors) > 0 then
    redis.call('HDEL', k.errors, unpack(done))
  end
end
return out
