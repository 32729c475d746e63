#!lua flags=allow-oom
-- nack.lua: ends deliveries that did not succeed.
-- Allowed at maxmemory: a retry only moves the record back, a death moves it on.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV: per delivery seven values
--   lease member (seq .. token),
--   mode       'f' failed attempt: retried by backoff, dead-lettered after the last attempt
--              'r' released unprocessed (worker shutdown): ready now (or at its due time, if a
--                  claim took it ahead of that), the attempt is not counted
--              'd' failed for good: a dead letter now, whatever attempts are left
--   error      text kept as the message's last error (mode 'f')
--   retry_ms   delay before the next attempt, or '' for the message's backoff policy
--   rnd        random number in [0,1) for backoff jitter
--   payload    '' to keep the payload, or '=' .. the payload of the next attempts (mode f, d),
--              or '#' .. that payload sealed (src/values/sealing.rs), for a message whose
--              stored payload is sealed: one sealed or not as its record's is not is ignored
--              (the record keeps its payload), so a payload never goes in clear where it is
--              marked sealed, nor the other way
--   attempts   '' or a signed number added to the message's attempts allowed, kept between
--              the attempts made and 65535 (mode f, d)
-- Returns per delivery: 'retry', 'dead', 'expired', 'dropped', 'released', 'superseded' (a
--   newer message took its caller id: pending.lua's drop_superseded) or 'lost' (lease lost;
--   nothing changed).
check_groups(7, 'nack')
for i = 1, #ARGV, 7 do
  local mode, retry_ms = ARGV[i + 1], ARGV[i + 3]
  if mode ~= 'f' and mode ~= 'r' and mode ~= 'd' then
    error('delayq: nack mode must be f, r or d, not ' .. mode)
  end
  if retry_ms ~= '' then
    arg_number(i + 3, 'retry_ms')
  end
  arg_number(i + 4, 'rnd')
  if ARGV[i + 5] ~= '' and ARGV[i + 5]:byte(1) ~= 61 and ARGV[i + 5]:byte(1) ~= 35 then
    error('delayq: a new payload starts with = or #')
  end
  if ARGV[i + 6] ~= '' then
    arg_number(i + 6, 'attempts')
  end
end
local now = now_us()
local now_ms = to_ms(now)
local out = {}
for i = 1, #ARGV, 7 do
  local member, mode = ARGV[i], ARGV[i + 1]
  local seq = member:sub(1, 6)
  local v = leased(member, now_ms) and redis.call('HGET', k.held, seq)
  if not v or v:sub(1, 6) ~= member:sub(7, 12) then
    out[#out + 1] = 'lost'
  else
    -- Parsed before the first write of this delivery; a record that cannot be read is kept
    -- as a dead letter, bytes intact, as a claim would.
    local ok, m = pcall(parse_held, seq, v)
    release_lease(member)
    if not ok then
      bury_raw(seq, v, 'undecodable record of ' .. (#v - 8) .. ' bytes', now)
      out[#out + 1] = 'dead'
    elseif mode == 'r' and superseded(m) then
      out[#out + 1] = drop_superseded(m)
    elseif mode == 'r' then
      m.attempts = math.max(m.attempts - 1, 0)
      -- A grouped message keeps its group's slot: it is still the next of its group.
      -- One taken ahead of its due time (a claim's look-ahead) waits for it again.
      put_pending(m, math.max(m.due, now), now, true)
      wake()
      event('released', m.id, 'n', m.attempts)
      out[#out + 1] = 'released'
    else
      if ARGV[i + 5] ~= '' and (ARGV[i + 5]:byte(1) == 35) == (m.sealed ~= nil) then
        m.payload = ARGV[i + 5]:sub(2)
      end
      if ARGV[i + 6] ~= '' then
        m.max = math.max(m.attempts, math.min(m.max + tonumber(ARGV[i + 6]), 65535))
      end
      local delay = tonumber(ARGV[i + 3]) or backoff_ms(m, tonumber(ARGV[i + 4]))
      out[#out + 1] = retry_or_bury(m, ARGV[i + 2], delay, now, mode == 'd')
    end
  end
end
return out
