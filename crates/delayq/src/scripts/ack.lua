#!lua
-- ack.lua: completes deliveries; the message is gone for good.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV: per delivery a triple: sequence bytes, lease token, id
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired; nothing changed).
local now_ms = to_ms(now_us())
local seqs = {}
for i = 1, #ARGV, 3 do
  seqs[#seqs + 1] = ARGV[i]
end
-- One read of each structure for the whole batch.
local held = redis.call('HMGET', k.held, unpack(seqs))
local deadlines = redis.call('ZMSCORE', k.leases, unpack(seqs))
local out, done, ids, explicit = {}, {}, {}, {}
for j, seq in ipairs(seqs) do
  local v, deadline = held[j], tonumber(deadlines[j])
  if v and deadline and deadline > now_ms and unbe6(v, 1) == tonumber(ARGV[3 * j - 1]) then
    local id = ARGV[3 * j]
    done[#done + 1] = seq
    ids[#ids + 1] = id
    if has(v:byte(20), F_ID) then
      explicit[#explicit + 1] = id
    end
    out[j] = 1
  else
    out[j] = 0
  end
end
if #done > 0 then
  redis.call('ZREM', k.leases, unpack(done))
  redis.call('HDEL', k.held, unpack(done))
  if #explicit > 0 then
    redis.call('HDEL', k.index, unpack(explicit))
  end
  if redis.call('HLEN', k.errors) > 0 then
    redis.call('HDEL', k.errors, unpack(ids))
  end
end
return out
