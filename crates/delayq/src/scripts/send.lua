#!lua
-- send.lua: adds one or more messages to the pending set.
-- Refused at maxmemory (no allow-oom flag): the caller gets the OOM error.
-- KEYS[1..11]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone
-- ARGV[1]: the queue's partition count P   ARGV[2]: this partition's index k (src/partitions.rs)
--   Sequence numbers here are k modulo P, so a message's sequence number names its partition.
-- ARGV[3..]: per message a triple
--   id     caller id, or '' for an id made from the sort key
--   due    '<ms>' delay from the server's now, or '@<ms>' absolute unix ms
--   body   the record without its 13-byte sort key (flags .. payload; src/record.rs)
-- Returns: { now µs, sequence before the first message, then per caller id that already
--   existed (nothing written for it): its position (1-based), its due ms, or -1 if in flight,
--   dead or gone within the idempotency window }.
--   Message i gets sequence first + i * P; the client derives due times and generated ids
--   from these, exactly as computed here.
local stride, offset = arg_number(1, 'partitions'), arg_number(2, 'partition')
check_groups(3, 'send', 2)
local now = now_us()
local now_ms = to_ms(now)
local n = (#ARGV - 2) / 3
-- Due times first: a bad one fails the call before INCRBY, its first write.
local dues = {}
for i = 1, n do
  dues[i] = due_from(ARGV[3 * i + 1], now)
end
local old_head = head_due()
if stride > 1 then
  redis.call('SET', k.seq, offset, 'NX')
end
local first = redis.call('INCRBY', k.seq, n * stride) - n * stride
local out = { now, first }
local members, indexed, taken = {}, {}, {}
local min_due = nil
for i = 1, n do
  local id, body = ARGV[3 * i], ARGV[3 * i + 2]
  local existing = id ~= '' and (taken[id] or redis.call('HGET', k.index, id)
    or redis.call('HEXISTS', k.dead_msgs, id) == 1 or recently_gone(id, now_ms))
  if existing then
    local existing_due = -1
    if type(existing) == 'string' and not held_value(existing) then
      existing_due = to_ms(unbe7(existing, 1))
    end
    out[#out + 1] = i
    out[#out + 1] = existing_due
  else
    local due = dues[i]
    local key = key_of(due, first + i * stride)
    members[#members + 1] = '0'
    members[#members + 1] = key .. body
    if id ~= '' then
      taken[id] = key
      indexed[#indexed + 1] = id
      indexed[#indexed + 1] = key
    end
    if min_due == nil or due < min_due then
      min_due = due
    end
  end
end
if #members > 0 then
  redis.call('ZADD', k.pending, unpack(members))
end
if #indexed > 0 then
  redis.call('HSET', k.index, unpack(indexed))
end
if min_due then
  wake_for(min_due, old_head, now)
end
return out
