#!lua
-- extend.lua: pushes the lease deadline of deliveries still held.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV[1]: new lease length in ms from the server's now; then per delivery a pair:
--   sequence bytes, lease token
-- Returns per delivery: the new deadline in ms, or 0 when the lease was lost (nothing changed).
local now_ms = to_ms(now_us())
local deadline = now_ms + tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV, 2 do
  local seq = ARGV[i]
  if leased(seq, tonumber(ARGV[i + 1]), now_ms) then
    redis.call('ZADD', k.leases, 'XX', deadline, seq)
    out[#out + 1] = deadline
  else
    out[#out + 1] = 0
  end
end
return out
