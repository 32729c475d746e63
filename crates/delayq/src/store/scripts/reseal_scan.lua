#!lua flags=no-writes
-- reseal_scan.lua: one bounded step of a walk through a partition's stored messages, for
-- `delayq keys rotate` (src/handles/reseal.rs): the records whose payload is not sealed with
-- the newest key. Read-only (no-writes): served at maxmemory.
-- KEYS[1..12]: the queue's keys (Keys::all): pending, index, leases, held, dead, dead_msgs, errors, seq,
--   wake, control, gone, claims
-- ARGV[1]: where the step is: 'p' the pending sets (by priority), 'gd' grouped messages not
--   yet due, 'g' the groups' sets of ready messages, 'b' the far-future buckets, 'd' the dead
--   letters
-- ARGV[2]: where in it the step starts: '' at its start; else what the step before answered
-- ARGV[3]: most records the step looks at (1 to 1000)
-- ARGV[4]: the newest key's id: a record sealed with it is left out
-- ARGV[5]: '1' to return records whose payload is not sealed too (the queue encrypts)
-- Returns: { next: where the next step starts in this part (ARGV[2]), or false when this
--   step reached its end; then per record found: 'p' (pending) or 'd' (dead), its id, the
--   record (with its sort key) }.
--   A walk may see a record twice (a message that moved meanwhile) or miss one that moved
--   behind it; the write (reseal.lua) changes only a record that is still as it was seen.
local part, from, budget, newest = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local plain_too = ARGV[5] == '1'
if budget == nil or budget < 1 or budget > 1000 or budget % 1 ~= 0 then
  error('delayq: a reseal step looks at 1 to 1000 records')
end
local out = { false }
local looked = 0
-- Adds record `rec` (of state `state`, 'p' or 'd') when its payload is not sealed with the
-- newest key.
local function consider(state, rec)
  looked = looked + 1
  local ok, m = pcall(parse, rec)
  if not ok then
    return
  end
  local key = nil
  if m.sealed then
    local n = m.payload:byte(1) or 0
    key = m.payload:sub(2, 1 + n)
  end
  if key == newest or (key == nil and not plain_too) then
    return
  end
  out[#out + 1] = state
  out[#out + 1] = m.id
  out[#out + 1] = rec
end
-- Reads sorted set `set` (all scores 0; whole records after `skip` bytes of each member)
-- from after member `after` ('' from its start), as far as the step's budget goes; returns
-- the last member read when the budget ran out there, or nil when the set's end was reached.
local function walk_set(set, after, skip)
  local room = budget - looked
  local lower = after == '' and '-' or '(' .. after
  local members = redis.call('ZRANGEBYLEX', set, lower, '+', 'LIMIT', 0, room)
  for _, member in ipairs(members) do
    consider('p', member:sub(skip + 1))
  end
  if #members < room then
    return nil
  end
  return members[#members]
end

if part == 'p' then
  -- '<priority index>:<last member>'
  local levels = priorities(redis.call('HGET', k.control, 'levels'))
  local i, after = 1, ''
  if from ~= '' then
    local sep = from:find(':', 1, true)
    i, after = tonumber(from:sub(1, sep - 1)), from:sub(sep + 1)
  end
  while i <= #levels and looked < budget do
    local last = walk_set(pending_key(levels[i]), after, 0)
    if last then
      out[1] = i .. ':' .. last
      break
    end
    i, after = i + 1, ''
  end
elseif part == 'gd' then
  local last = walk_set(groups().gk.delayed, from, 0)
  out[1] = last or false
elseif part == 'g' then
  -- '<ZSCAN cursor of the groups>|<group>|<last member>': a group's set is read in steps
  -- too; the groups come from ZSCAN, which may give one twice.
  local cursor, group, after = '0', nil, ''
  if from ~= '' then
    local a = from:find('|', 1, true)
    local b = from:find('|', a + 1, true)
    cursor, group, after = from:sub(1, a - 1), from:sub(a + 1, b - 1), from:sub(b + 1)
  end
  if group and group ~= '' then
    local last = walk_set(groups().group_set(group), after, 1)
    if last then
      out[1] = cursor .. '|' .. group .. '|' .. last
      return out
    end
    if cursor == '0' then
      return out
    end
  end
  local scanned = redis.call('ZSCAN', groups().gk.size, cursor, 'COUNT', 10)
  local next_cursor, names = scanned[1], scanned[2]
  for j = 1, #names, 2 do
    local g = names[j]
    local last = walk_set(groups().group_set(g), '', 1)
    if last then
      -- This group is read on; the rest of this ZSCAN page is read again next time.
      out[1] = cursor .. '|' .. g .. '|' .. last
      return out
    end
  end
  if next_cursor ~= '0' then
    out[1] = next_cursor .. '||'
  end
elseif part == 'b' then
  -- '<bucket name>': whole buckets (each is small, buckets.lua), in order of their start.
  local names = redis.call('ZRANGE', BUCKET_INDEX, 0, -1)
  local started = from == ''
  for _, name in ipairs(names) do
    if started then
      for _, rec in ipairs(redis.call('LRANGE', PART_PREFIX .. 'b:' .. name, 0, -1)) do
        consider('p', rec)
      end
      if looked >= budget then
        out[1] = name
        break
      end
    elseif name == from then
      started = true
    end
  end
elseif part == 'd' then
  local scanned = redis.call('HSCAN', k.dead_msgs, from == '' and '0' or from, 'COUNT', budget)
  for j = 2, #scanned[2], 2 do
    consider('d', scanned[2][j])
  end
  out[1] = scanned[1] ~= '0' and scanned[1] or false
else
  error('delayq: no part ' .. part .. ' of a partition to walk')
end
return out
