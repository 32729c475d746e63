#!lua flags=allow-oom
-- announce.lua: a process announces the newest data format it reads, or takes its
-- announcement back (the registry of processes: README, "Upgrading"). Runs without the
-- prelude: it touches no queue.
-- Allowed at maxmemory: a member is a few bytes, and a full Redis must still be drained.
-- KEYS[1]: dq:processes, ZSET of '<newest format> <process>' scored by lease deadline (ms)
-- ARGV[1]: the member   ARGV[2]: the lease in ms   ARGV[3]: 'withdraw' takes the member out
-- Returns: the server's time in ms.
local lease = tonumber(ARGV[2])
if lease == nil or lease <= 0 then
  error('delayq: announce: a lease is a count of ms, not ' .. tostring(ARGV[2]))
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A member is counted one lease past its deadline (its process may have calls on their
-- way), then pruned: the set holds the processes of about the last two leases.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - lease))
if ARGV[3] == 'withdraw' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
end
return now
