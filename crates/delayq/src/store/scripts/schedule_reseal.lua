#!lua
-- schedule_reseal.lua: puts a recurring schedule's message body whose payload was sealed
-- again (`delayq keys rotate`, src/handles/reseal.rs) in place of the one it was made
-- from, only while the schedule still holds that one: a schedule put or deleted meanwhile
-- is left as it is. Runs without the prelude.
-- KEYS[1]: the schedule's hash (Keys::schedule)
-- ARGV[1]: the body as it was read  ARGV[2]: the body to put in its place
-- Returns: 1 when it was put in place, 0 when the schedule no longer holds ARGV[1].
if redis.call('HGET', KEYS[1], 'body') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'body', ARGV[2])
return 1
