#!lua flags=allow-oom
-- partitions.lua: a queue's partition count P, recorded on its first use (src/partitions.rs).
-- Runs without the prelude: it touches no partition's keys but these two.
-- Allowed at maxmemory: a consumer draining a full Redis must learn P; the key is a few bytes.
-- KEYS[1]: dq:{<queue>}:partitions   KEYS[2]: dq:{<queue>}:seq (partition 0's sequence)
-- ARGV[1]: the count asked for, '' for whatever the queue has (1 for a new queue), or '?'
--   to read the count without recording one
-- Returns: the count recorded (nil for '?' on a queue without one): a string, or an integer
--   when this call recorded it (a new queue, which the caller stamps with its data format).
--   It differs from the one asked for when the queue already had a count, or was used
--   before it had one (its messages are numbered for one partition).
local current = redis.call('GET', KEYS[1])
if current or ARGV[1] == '?' then
  return current
end
local wanted = ARGV[1]
if wanted == '' or redis.call('EXISTS', KEYS[2]) == 1 then
  wanted = '1'
end
redis.call('SET', KEYS[1], wanted)
return tonumber(wanted)
