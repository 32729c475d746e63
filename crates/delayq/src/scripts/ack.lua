#!lua flags=allow-oom
-- ack.lua: completes deliveries; the message is gone for good.
-- Allowed at maxmemory: it frees memory.
-- KEYS[1..11]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone
-- ARGV: per delivery a triple: lease member (seq .. token), id, '1' if the id is explicit
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired; nothing changed).
check_groups(3, 'ack')
local now = now_us()
local now_ms = to_ms(now)
local members = {}
for i = 1, #ARGV, 3 do
  members[#members + 1] = ARGV[i]
end
-- One read for the whole batch: a stale token's member is simply not there.
local deadlines = redis.call('ZMSCORE', k.leases, unpack(members))
local out, done, seqs, ids, explicit = {}, {}, {}, {}, {}
for j, member in ipairs(members) do
  local deadline = tonumber(deadlines[j])
  if deadline and deadline > now_ms then
    local id = ARGV[3 * j - 1]
    done[#done + 1] = member
    seqs[#seqs + 1] = member:sub(1, 6)
    ids[#ids + 1] = id
    if ARGV[3 * j] == '1' then
      explicit[#explicit + 1] = id
    end
    out[j] = 1
  else
    out[j] = 0
  end
end
if #done > 0 then
  add_history(now, 'a', #done)
  redis.call('ZREM', k.leases, unpack(done))
  redis.call('HDEL', k.held, unpack(seqs))
  if #explicit > 0 then
    redis.call('HDEL', k.index, unpack(explicit))
    remember_gone(explicit, now_ms)
  end
  if redis.call('HLEN', k.errors) > 0 then
    redis.call('HDEL', k.errors, unpack(ids))
  end
end
return out
