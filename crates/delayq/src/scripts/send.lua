#!lua
-- send.lua: adds one or more messages to the pending set.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV: per message a triple
--   id     caller id, or '' for an id made from the sort key
--   due    '+<ms>' delay from the server's now, or '@<ms>' absolute unix ms
--   body   the record without its 13-byte sort key (flags .. payload; src/record.rs)
-- Returns per message: id, due ms (-1 if unknown), 1 if the id already existed (nothing written) else 0.
local now = now_us()
local n = #ARGV / 3
local old_head = head_due(k.pending)
local seq = redis.call('INCRBY', k.seq, n) - n
local out, members, indexed, taken = {}, {}, {}, {}
local min_due = nil
for i = 0, n - 1 do
  local id, body = ARGV[3 * i + 1], ARGV[3 * i + 3]
  local due = due_from(ARGV[3 * i + 2], now)
  seq = seq + 1
  local existing = id ~= '' and (taken[id] or redis.call('HGET', k.index, id)
    or redis.call('HEXISTS', k.held, id) == 1 or redis.call('HEXISTS', k.dead_msgs, id) == 1)
  if existing then
    local existing_due = -1
    if type(existing) == 'string' then
      existing_due = to_ms(unbe7(existing, 1))
    end
    out[#out + 1] = id
    out[#out + 1] = existing_due
    out[#out + 1] = 1
  else
    local key = key_of(due, seq)
    members[#members + 1] = 0
    members[#members + 1] = key .. body
    if id == '' then
      id = string.format('%d-%d', due, seq)
    else
      taken[id] = key
      indexed[#indexed + 1] = id
      indexed[#indexed + 1] = key
    end
    if min_due == nil or due < min_due then
      min_due = due
    end
    out[#out + 1] = id
    out[#out + 1] = to_ms(due)
    out[#out + 1] = 0
  end
end
if #members > 0 then
  redis.call('ZADD', k.pending, unpack(members))
end
if #indexed > 0 then
  redis.call('HSET', k.index, unpack(indexed))
end
if min_due then
  wake_for(k.wake, min_due, old_head, now)
end
return out
