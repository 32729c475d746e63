#!lua
-- send.lua: adds one or more messages to the pending set.
-- KEYS[1..9]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq, wake
-- ARGV: per message a triple
--   id     caller id, or '' for an id made from the sort key
--   due    '+<ms>' delay from the server's now, or '@<ms>' absolute unix ms
--   body   the record without its 12-byte sort key (flags .. payload; src/record.rs)
-- Returns per message: id, due ms (-1 if unknown), 1 if the id already existed (nothing written) else 0.
local now_ms = math.floor(now_us() / 1000)
local n = #ARGV / 3
local old_head = head_due(k.pending)
local seq = redis.call('INCRBY', k.seq, n) - n
local out, min_due = {}, nil
for i = 0, n - 1 do
  local id, spec, body = ARGV[3 * i + 1], ARGV[3 * i + 2], ARGV[3 * i + 3]
  local due = tonumber(spec:sub(2))
  if spec:sub(1, 1) == '+' then
    due = now_ms + due
  end
  seq = seq + 1
  local existing = id ~= '' and (redis.call('HGET', k.index, id)
    or redis.call('HEXISTS', k.held, id) == 1 or redis.call('HEXISTS', k.dead_msgs, id) == 1)
  if existing then
    local existing_due = -1
    if type(existing) == 'string' then
      existing_due = unbe48(existing, 1)
    end
    out[#out + 1] = id
    out[#out + 1] = existing_due
    out[#out + 1] = 1
  else
    local key = be48(due) .. be48(seq)
    redis.call('ZADD', k.pending, 0, key .. body)
    if id == '' then
      id = fmt(due) .. '-' .. fmt(seq)
    else
      redis.call('HSET', k.index, id, key)
    end
    if min_due == nil or due < min_due then
      min_due = due
    end
    out[#out + 1] = id
    out[#out + 1] = due
    out[#out + 1] = 0
  end
end
if min_due then
  wake_for(k.wake, min_due, old_head, now_ms)
end
return out
