#!lua flags=no-writes
-- group_info.lua: what one group holds, and its settings.
-- Read-only (no-writes): served at maxmemory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: the group
-- Returns: { messages (pending and in flight), ready, slots taken (in flight and slot
--   keepers), slot keepers waiting for their retry, slot keepers ready, its own settings
--   ('l=..,w=..,p=1,r=..,b=..' or ''), the queue's group concurrency (0: none), the queue's
--   rate limit of each group ('<per second>/<burst>' or '') }
local G = groups()
local g = ARGV[1] or ''
local set = G.group_set(g)
return {
  tonumber(redis.call('ZSCORE', G.gk.size, g) or '0'),
  redis.call('ZCARD', set),
  G.busy_of(g),
  tonumber(redis.call('HGET', G.gk.retry, g) or '0'),
  redis.call('ZLEXCOUNT', set, '[' .. G.KEEPER_RANK, '(\1'),
  redis.call('HGET', G.gk.conf, g) or '',
  tonumber(redis.call('HGET', k.control, 'gconc') or '0'),
  redis.call('HGET', k.control, 'grate') or '',
}
