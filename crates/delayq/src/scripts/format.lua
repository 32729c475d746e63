-- format.lua: the data format check that every script (but partitions.lua) runs first.
-- Not a script of its own: scripts.rs inserts it after each script's `#!lua` line, before
-- the prelude.
-- KEYS[10]: the partition's control hash (Keys::all), whose field `format` names the format
--   the partition's data is in; none: format 1, all data written before formats were named.
-- Data of a newer format was written by a newer delayq: it is refused before anything is
-- read or written, so that this process can neither misread it nor write into it.
local FORMAT = 1
do
  local named = redis.call('HGET', KEYS[10], 'format')
  local found = tonumber(named or '1')
  if found == nil or found > FORMAT then
    error('delayq: this queue\'s data is format ' .. tostring(named) .. ', newer than format '
      .. FORMAT .. ', the newest this delayq reads: upgrade this process')
  end
end
