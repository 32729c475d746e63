#!lua flags=no-writes
-- group_list.lua: the groups of a partition, most messages first.
-- Read-only (no-writes): served at maxmemory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: how many to skip  ARGV[2]: most to return (1 to 11000: a page of up to 1000 from
--   as deep as 10000, the groups handle)
-- Returns: { groups in all, then per group: name, messages (pending and in flight) }
local G = groups()
local skip, limit = arg_number(1, 'skip'), arg_number(2, 'limit')
if limit < 1 or limit > 11000 or skip < 0 then
  error('delayq: a page of groups skips 0 or more and holds 1 to 11000')
end
local out = { redis.call('ZCARD', G.gk.size) }
local page = redis.call('ZRANGE', G.gk.size, '+inf', '-inf', 'BYSCORE', 'REV', 'LIMIT', skip, limit, 'WITHSCORES')
for i = 1, #page, 2 do
  out[#out + 1] = page[i]
  out[#out + 1] = tonumber(page[i + 1])
end
return out
