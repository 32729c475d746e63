-- acking.lua: completing deliveries (the message is gone for good), for ack.lua and for a
-- claim that carries the acks of its consumer's worker (claim.lua). Not a script of its own:
-- scripts.rs places it after pending.lua.

-- Acks the deliveries named by args[from..]: per delivery one argument, its lease member
-- (seq .. token, 12 bytes) followed, for a caller id, by the id (from the client's receipt:
-- the kind of id must agree with the held record, and a caller id with the index; a generated
-- id is not sent, it follows from the held record). `now`: the call's time, µs.
-- Returns per delivery: 1 acked, 0 lease lost (token stale or lease expired) or a receipt that
-- does not match the message it holds; nothing changed for a 0.
-- (Every delivery costs the interpreter here, so the loops are few, counted, not `#t + 1`,
-- and each argument is cut once.)
local function ack_leases(args, from, now)
  local now_ms = to_ms(now)
  local n = #args - from + 1
  -- Per delivery j: its lease member, seq, caller id (or false), and once found its lease's
  -- deadline; held by a claim: its place, claim (token base) and the place's flags byte.
  local members, seq_of, caller_id, deadlines, place, base_of, flags = {}, {}, {}, {}, {}, {}, {}
  for j = 1, n do
    local arg = args[from + j - 1]
    -- (Before any write: a malformed call changes nothing.)
    if #arg < 12 then
      error('delayq: an ack names a lease member of 12 bytes, not ' .. #arg .. ' (argument '
        .. (from + j - 1) .. ')')
    elseif #arg > 12 then
      members[j], caller_id[j] = arg:sub(1, 12), arg:sub(13)
    else
      members[j], caller_id[j] = arg, false
    end
    seq_of[j] = arg:sub(1, 6)
  end
  -- Each delivery's lease: its claim's (data format 6: each claim named read once, its
  -- lease and its field; the flags byte its place keeps means its record need not be read)
  -- or its own (one ZMSCORE for all; a stale token's member is simply not there). A batch
  -- looks for claims first, as a claim's deliveries are acked together; a single ack for
  -- its own lease first.
  local claims, bases, SPAN, SLOT = {}, {}, claim_leases.SPAN, claim_leases.SLOT
  local function claimed(first, last)
    local named, count, last_base, base = {}, 0, -1, nil
    for j = first, last do
      local t = struct.unpack('>I6', members[j], 7)
      local at = t % SPAN
      if at > 0 then
        if t - at ~= last_base then
          last_base = t - at
          base = be6(last_base)
          if not claims[base] then
            claims[base] = { js = {}, named = {} }
            bases[#bases + 1] = base
          end
        end
        place[j], base_of[j] = at, base
        count = count + 1
        named[count] = j
      end
    end
    if count == 0 then
      return
    end
    local fields = redis.call('HMGET', k.claims, unpack(bases))
    local ends = redis.call('ZMSCORE', k.leases, unpack(bases))
    for i, base in ipairs(bases) do
      claims[base].slots = fields[i] or nil
      claims[base].deadline = tonumber(ends[i])
    end
    for i = 1, count do
      local j = named[i]
      local claim, at = claims[base_of[j]], place[j]
      local slots = claim.slots
      if slots and not claim.named[at] and (claim.deadline or 0) > now_ms then
        -- (claim_leases.slot written out: this runs for every delivery of a claim.)
        local from_byte = 3 + SLOT * (at - 1)
        if slots:sub(from_byte, from_byte + 5) == seq_of[j] then
          claim.named[at] = true
          flags[j], deadlines[j] = slots:byte(from_byte + 6), claim.deadline
        end
      end
    end
  end
  local function owned(which, count)
    local listed = {}
    for i = 1, count do
      listed[i] = members[which[i]]
    end
    for i, d in ipairs(redis.call('ZMSCORE', k.leases, unpack(listed))) do
      deadlines[which[i]] = tonumber(d)
    end
  end
  if n > 1 then
    claimed(1, n)
    local rest, count = {}, 0
    for j = 1, n do
      if not flags[j] then
        count = count + 1
        rest[count] = j
      end
    end
    if count > 0 then
      owned(rest, count)
    end
  elseif n == 1 then
    owned({ 1 }, 1)
    if not deadlines[1] then
      claimed(1, 1)
    end
  end
  -- The live deliveries, and of them those whose held records must be read: what a lease of
  -- its own holds is named by its record, as is a message with a caller id or an extension
  -- area, and every one when errors or events need ids.
  local any_errors = redis.call('HLEN', k.errors) > 0
  local all = any_errors or (next(flags) ~= nil and events_on())
  local live, live_count, need, need_count, plain = {}, 0, {}, 0, claim_leases.plain
  for j = 1, n do
    local deadline = deadlines[j]
    if deadline and deadline > now_ms then
      live_count = live_count + 1
      live[live_count] = j
      local f = flags[j]
      if all or not f or not plain(f) then
        need_count = need_count + 1
        need[need_count] = j
      end
    end
  end
  -- held[j]: the held record of delivery j where read.
  local held = {}
  if need_count > 0 then
    local seqs = {}
    for i = 1, need_count do
      seqs[i] = seq_of[need[i]]
    end
    for i, v in ipairs(redis.call('HMGET', k.held, unpack(seqs))) do
      held[need[i]] = v
    end
  end
  -- `generated`: the held values of every delivery acked (of generated ids, then of caller ids;
  -- false where not read: a place of a claim with a generated id and no extension area).
  local out, done, seqs, explicit, generated, done_count = {}, {}, {}, {}, {}, 0
  for j = 1, n do
    out[j] = 0
  end
  local function acked(j, v)
    done_count = done_count + 1
    done[done_count], seqs[done_count], generated[done_count] = j, seq_of[j], v
    out[j] = 1
  end
  -- What the receipt says must be what the held record is, checked without parsing the
  -- record: its kind of id against the flags byte (F_ID, bit 0), and a caller id must be
  -- indexed to this lease's sequence number. A generated id is not taken from the receipt at
  -- all: it follows from the held record, and is only needed for the error history below.
  -- (A live lease's held value carries the same token: claim, extend and nack change the two
  -- together, so the lease read above has checked the token; a claim's place likewise.)
  local callers, caller_ids, caller_count = {}, {}, 0
  for i = 1, live_count do
    local j = live[i]
    local v = held[j]
    local f = flags[j] or (v and v:byte(22))
    if f then
      local indexed = f % 2 == 1
      if caller_id[j] then
        if indexed and v then
          caller_count = caller_count + 1
          callers[caller_count], caller_ids[caller_count] = j, caller_id[j]
        end
      elseif not indexed then
        acked(j, v or false)
      end
    end
  end
  -- A caller id indexed to another message was superseded (send.lua's upsert wrote a newer
  -- message under it): its ack counts if the held record bears that id, and leaves the id's
  -- index entry, errors and idempotency to the newer message.
  local superseded = {}
  if caller_count > 0 then
    local keys = redis.call('HMGET', k.index, unpack(caller_ids))
    for i = 1, caller_count do
      local j, key, id = callers[i], keys[i], caller_ids[i]
      local v = held[j]
      local own = key and key:sub(8, 13) == seq_of[j]
      if own or id_of(v:sub(9), v:byte(22)) == id then
        acked(j, v)
        if own then
          explicit[#explicit + 1] = id
        else
          superseded[id] = true
        end
      end
    end
  end
  if done_count > 0 then
    add_history(now, 'a', done_count)
    -- What the extension areas say, read without parsing whole records: a grouped message
    -- (its area names a group, groups.lua) frees its group's slot, count and index entry,
    -- each group changed once per call; a message sent while its queue retained (its area
    -- says when it was sent) leaves its final record (retention.lua) if the queue still
    -- retains. A message without an area costs a flags test.
    local gone, gone_superseded, retained = {}, {}, {}
    -- (A value not read is plain: it has no extension area; none was read, none to test.)
    for i = 1, need_count > 0 and done_count or 0 do
      local v = generated[i]
      local extension = v and select(2, kind_of(v:byte(22)))
      if extension then
        local rec, f = v:sub(9), v:byte(22)
        local _, from, to = policy_end(rec, f)
        local group = field_of(rec, from, to, TAG_GROUP)
        if group then
          local id = id_of(rec, f)
          local list = superseded[id] and gone_superseded or gone
          list[#list + 1] = { id, group }
        end
        if field_of(rec, from, to, TAG_SENT) then
          retained[#retained + 1] = i
        end
      end
    end
    if #retained > 0 and retention() then
      local ended = {}
      for _, i in ipairs(retained) do
        local ok, m = pcall(parse_held, seqs[i], generated[i])
        if ok and m.sent_at then
          ended[#ended + 1] = { m, 'a', any_errors and redis.call('HGET', k.errors, m.id) or nil }
        end
      end
      retention().keep(ended, now)
    end
    -- Leases of their own end; places leave their claims, and a claim's lease ends with its
    -- last message.
    local own, own_count = {}, 0
    for i = 1, done_count do
      local j = done[i]
      if flags[j] then
        local js = claims[base_of[j]].js
        js[#js + 1] = place[j]
      else
        own_count = own_count + 1
        own[own_count] = members[j]
      end
    end
    if own_count > 0 then
      redis.call('ZREM', k.leases, unpack(own))
    end
    for _, base in ipairs(bases) do
      local claim = claims[base]
      if #claim.js > 0 then
        claim_leases.leave(base, claim.slots, claim.js)
      end
    end
    redis.call('HDEL', k.held, unpack(seqs))
    if #explicit > 0 then
      redis.call('HDEL', k.index, unpack(explicit))
      remember_gone(explicit, now_ms)
    end
    if any_errors then
      -- Errors are kept by id (a requeued dead letter keeps its history, whatever its
      -- attempts), so the generated ids are made only here, when some message has errors.
      local ids = {}
      for _, id in ipairs(explicit) do
        ids[#ids + 1] = id
      end
      for _, v in ipairs(generated) do
        if v:byte(22) % 2 == 0 then
          ids[#ids + 1] = string.format('%d-%d', unbe7(v, 9), unbe6(v, 16))
        end
      end
      redis.call('HDEL', k.errors, unpack(ids))
    end
    if events_on() then
      for _, v in ipairs(generated) do
        local flags = v:byte(22)
        event_packed('acked', v:sub(7, 21), has(flags, F_ID) and id_of(v:sub(9), flags) or '')
      end
      flush_events()
    end
    local woke = #gone > 0 and groups().groups_leave(gone, true)
    woke = #gone_superseded > 0 and groups().groups_leave(gone_superseded, true, true) or woke
    if woke then
      wake()
    end
  end
  return out
end
