#!lua flags=allow-oom
-- ack.lua: completes deliveries; the message is gone for good.
-- Allowed at maxmemory: it frees memory.
-- KEYS[1..11]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone
-- ARGV: per delivery a triple: lease member (seq .. token), id, '1' if the id is explicit
--   (the id and the flag come from the client's receipt: they must agree with the held
--   record, which decides what is deleted)
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired) or a receipt
--   that does not match the message it holds; nothing changed for a 0.
check_groups(3, 'ack')
local now = now_us()
local now_ms = to_ms(now)
local members = {}
for i = 1, #ARGV, 3 do
  members[#members + 1] = ARGV[i]
end
-- One read for the whole batch: a stale token's member is simply not there.
local deadlines = redis.call('ZMSCORE', k.leases, unpack(members))
local live, live_seqs = {}, {}
for j, member in ipairs(members) do
  local deadline = tonumber(deadlines[j])
  if deadline and deadline > now_ms then
    live[#live + 1] = j
    live_seqs[#live_seqs + 1] = member:sub(1, 6)
  end
end
-- And one for the held records of the live leases: what is deleted is named by them.
local held = {}
if #live_seqs > 0 then
  held = redis.call('HMGET', k.held, unpack(live_seqs))
end
local out, done, seqs, ids, explicit = {}, {}, {}, {}, {}
for j = 1, #members do
  out[j] = 0
end
for n, j in ipairs(live) do
  local member, v = members[j], held[n]
  if v and v:sub(1, 6) == member:sub(7, 12) then
    -- The record's head (fixed fields, retry policy, id) fits in its first 512 bytes; the
    -- payload after it is not copied.
    local flags = v:byte(22)
    local id = id_of(v:sub(9, 520), flags)
    local is_explicit = has(flags, F_ID)
    if id == ARGV[3 * j - 1] and is_explicit == (ARGV[3 * j] == '1') then
      done[#done + 1] = member
      seqs[#seqs + 1] = member:sub(1, 6)
      ids[#ids + 1] = id
      if is_explicit then
        explicit[#explicit + 1] = id
      end
      out[j] = 1
    end
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
