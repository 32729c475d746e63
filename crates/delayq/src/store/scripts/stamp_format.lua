#!lua flags=allow-oom
-- stamp_format.lua: the upgrade's step on one partition: names the format of its data
-- (README, "Upgrading", states when it may run). Runs without the prelude.
-- KEYS[1]: the partition's control hash (dq:{<tag>}:control)
-- ARGV[1]: the format to stamp
-- Returns: the format the partition was in (a newer one than ARGV[1] is left as it is).
-- Nothing in the records changes: every format so far reads its predecessor's records.
local wanted = tonumber(ARGV[1])
if wanted == nil then
  error('delayq: stamp_format: a format is a number, not ' .. tostring(ARGV[1]))
end
local was = tonumber(redis.call('HGET', KEYS[1], 'format') or '1')
if was ~= nil and was < wanted then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'format', wanted, 'format_since_ms',
    tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
return was or -1
