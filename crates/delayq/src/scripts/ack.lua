#!lua
-- ack.lua: completes deliveries; the message is gone for good.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV: per delivery a pair: id, lease token
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired; nothing changed).
local now_ms = math.floor(now_us() / 1000)
local out = {}
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  if leased(k.leases, k.held, id, tonumber(ARGV[i + 1]), now_ms) then
    release_lease(k.leases, k.held, id)
    redis.call('HDEL', k.errors, id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
