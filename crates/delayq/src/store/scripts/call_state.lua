-- call_state.lua: what every call starts from. Not a script of its own: scripts.rs places it
-- after the other shared parts (prelude.lua to acking.lua).
-- Those parts' helpers are made once in the Functions library (one per server): most when
-- it is loaded, the groups', buckets', retention's and expiry's on first use (make_groups
-- and the like), and kept. A script run by EVALSHA makes them again in each call (those four
-- only if the call uses them). Either way what belongs to one call (its KEYS and ARGV, the
-- partition's keys, what the call has read or made so far: the names marked "per call") is
-- set here, before the script's own code runs.
local function begin_call(keys, argv)
  KEYS, ARGV = keys, argv
  k = {
    pending = keys[1], index = keys[2], leases = keys[3], held = keys[4], dead = keys[5],
    dead_msgs = keys[6], errors = keys[7], seq = keys[8], wake = keys[9], control = keys[10],
    gone = keys[11], claims = keys[12],
  }
  PART_PREFIX = k.pending:sub(1, #k.pending - #'pending')
  HISTORY_PREFIX = PART_PREFIX .. 'm:'
  EVENTS = PART_PREFIX .. 'events'
  BUCKET_INDEX = PART_PREFIX .. 'buckets'
  events_cap, events_published = nil, false
  packed, packed_kinds = {}, {}
  groups_made, retention_made, expiry_made, buckets_made = nil, nil, nil, nil
end
