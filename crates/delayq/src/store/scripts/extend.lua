#!lua flags=allow-oom
-- extend.lua: pushes the lease deadline of deliveries still held.
-- Allowed at maxmemory: it rewrites scores in place, and a message that leaves its claim's
--   lease for one of its own adds a few bytes.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: new lease length in ms from the server's now; then per delivery its lease member
--   (seq .. token)
-- Returns per delivery: the new deadline in ms, or 0 when the lease was lost (nothing changed).
-- A claim's lease (data format 6) is pushed whole when every message it still holds is
-- named; the messages named of a claim only in part leave it, each for a lease of its own.
local now_ms = to_ms(now_us())
local deadline = now_ms + arg_number(1, 'lease ms')
local out, claims, order = {}, {}, {}
for i = 2, #ARGV do
  local member = ARGV[i]
  local held_until, base, j, slots = claim_leases.deadline(member:sub(1, 6), member:sub(7, 12))
  if held_until == nil or held_until <= now_ms then
    out[i - 1] = 0
  else
    out[i - 1] = deadline
    if base then
      local claim = claims[base]
      if not claim then
        claim = { slots = slots, js = {}, members = {}, named = {} }
        claims[base] = claim
        order[#order + 1] = base
      end
      if not claim.named[j] then
        claim.named[j] = true
        claim.js[#claim.js + 1] = j
        claim.members[#claim.members + 1] = member
      end
    else
      redis.call('ZADD', k.leases, 'XX', deadline, member)
    end
  end
end
for _, base in ipairs(order) do
  local claim = claims[base]
  if #claim.js == struct.unpack('>H', claim.slots, 1) then
    redis.call('ZADD', k.leases, 'XX', deadline, base)
  else
    claim_leases.leave(base, claim.slots, claim.js)
    for _, member in ipairs(claim.members) do
      redis.call('ZADD', k.leases, deadline, member)
    end
  end
end
return out
