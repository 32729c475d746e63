-- events.lua: a queue's event stream, one entry per change of a message's state. Not a
-- script of its own: scripts.rs inserts it after prelude.lua, so every helper after it
-- (groups, retention, expiry, pending) and every script can record what it changes.
--
-- A queue with events on (control field `events`: how many entries each partition keeps,
-- about; Setting::Events) gets each change appended, by the script that makes the change,
-- to its partition's stream `dq:{tag}:events` (XADD MAXLEN ~): an event is written if and
-- only if its change was, since both are one script. A queue with them off pays one HGET of
-- its control hash in a call that changes something (claim.lua and send.lua read it with
-- the settings they read anyway), and writes nothing. The entry's stream id is the Redis
-- server's time of the change (the event reader reads it).
--
-- The events of the busy paths (sent, delivered, acked) of one call go into entries of
-- their kind of up to PACK_MAX, packed (field `m`): per message its attempts (u16: of a
-- delivery or an ack, this delivery's number) and sort key (13 bytes), as a held value
-- has them side by side, then its caller id (a length byte, then the id; length 0 for an
-- id made from the sort key). An XADD per call
-- and kind (per PACK_MAX messages), not per message, keeps events cheap where queues are
-- busy. The others are an entry each. The cap counts entries (MAXLEN), so it bounds memory
-- at most PACK_MAX events' worth per entry. Fields:
--   k    kind: sent, delivered, acked, retry, released, dead, expired, superseded,
--        cancelled, rescheduled, requeued, purged
--   m    packed: the messages of an entry of many (above); or
--   id   the message's id
--   n    attempts: of a delivery, its number; of a retry, dead or expired message, the
--        attempts made
--   due  unix ms the message is due (sent, retry, rescheduled)
--   err  the error that ended an attempt, at most EVENT_ERROR_BYTES (retry, dead, expired)
--   x    what else happened: 'replaced' (a send that took the place of a pending message),
--        'superseded' (a send beside a message in flight), 'dropped' (an expired message
--        gone, not a dead letter)
-- The first event of a call publishes to the channel of the stream's name (SPUBLISH), so
-- readers wait for events without polling; the call is atomic, so whoever hears it reads the
-- stream after everything the call wrote.

-- Per call: the partition's stream.
local EVENTS
local EVENT_ERROR_BYTES, PACK_MAX = 200, 100
-- Per call: the partition's cap as text, false when events are off, nil until read.
local events_cap = nil
local events_published = false

-- Tells this call the queue's `events` control field when the script has read it already
-- (false: off), so recording costs no read of its own.
local function events_known(value)
  if events_cap == nil then
    events_cap = value or false
  end
end

-- Whether the queue records events (read once a call): a script that must work out what
-- an event says (an id, say) asks first, so a queue without events pays for none of it.
local function events_on()
  if events_cap == nil then
    events_cap = redis.call('HGET', k.control, 'events')
  end
  return events_cap
end

-- Tells the stream's readers, once a call, that it added events.
local function publish_events()
  if not events_published then
    events_published = true
    redis.call('SPUBLISH', EVENTS, '1')
  end
end

-- Appends an event of `kind` for message `id` with more fields (name, value, ...), when the
-- queue records events.
local function event(kind, id, ...)
  if not events_on() then
    return
  end
  redis.call('XADD', EVENTS, 'MAXLEN', '~', events_cap, '*', 'k', kind, 'id', id, ...)
  publish_events()
end

-- Per call: packed events by kind, in the order of their kinds' first event.
local packed, packed_kinds = {}, {}

-- Adds an event of `kind` to this call's packed entry of that kind: `head` is the
-- message's attempts (u16) and sort key (13 bytes), one substring of a held value or a
-- record's key; `id` its caller id ('' for a generated one). Each message is two pieces of
-- the list, joined once at the flush: a busy call makes one new string per message. The
-- caller checked events_on() first.
local NO_ID = '\0'
local function event_packed(kind, head, id)
  local list = packed[kind]
  if not list then
    list = {}
    packed[kind] = list
    packed_kinds[#packed_kinds + 1] = kind
  end
  list[#list + 1] = head
  list[#list + 1] = id == '' and NO_ID or string.char(#id) .. id
end

-- Writes this call's packed entries: an XADD per kind and PACK_MAX messages.
local function flush_events()
  for _, kind in ipairs(packed_kinds) do
    local list = packed[kind]
    for from = 1, #list, 2 * PACK_MAX do
      redis.call('XADD', EVENTS, 'MAXLEN', '~', events_cap, '*', 'k', kind, 'm',
        table.concat(list, '', from, math.min(from + 2 * PACK_MAX - 1, #list)))
    end
  end
  if #packed_kinds > 0 then
    publish_events()
  end
  packed, packed_kinds = {}, {}
end

-- An error as an event carries it: its first EVENT_ERROR_BYTES.
local function event_error(err)
  return (err or ''):sub(1, EVENT_ERROR_BYTES)
end
