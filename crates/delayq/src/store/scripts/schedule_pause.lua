#!lua flags=allow-oom
-- schedule_pause.lua: pauses or resumes one recurring schedule (the schedules handle), only if it
-- exists: a pause racing a delete must not leave a schedule of one field behind. Runs
-- without the prelude.
-- Allowed at maxmemory: pausing a schedule is how a full queue stops growing.
-- KEYS[1]: the schedule's hash (Keys::schedule)
-- ARGV[1]: '1' to pause, '' to resume
-- Returns: 1 when the schedule exists (and is now as asked), 0 when there is none.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[1], 'paused', '1')
elseif ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'paused')
else
  error('delayq: schedule_pause: 1 or nothing, not ' .. tostring(ARGV[1]))
end
return 1
