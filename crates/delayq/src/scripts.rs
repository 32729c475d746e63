//! The Lua scripts, one file each under `scripts/`. Every state change of a queue is one of
//! these scripts, so it is atomic without any lock.
//!
//! Each script starts with `#!lua` (so Redis 7 treats it as a script with declared keys),
//! with `flags=allow-oom` where it drains or frees (it must work when Redis is at
//! `maxmemory`) or `flags=no-writes` where it only reads; scripts without a flag (send,
//! reschedule, requeue) are refused at `maxmemory`. The shared helpers of `prelude.lua`,
//! `events.lua`, `groups.lua`, `retention.lua`, `expiry.lua`, `buckets.lua` and `pending.lua` are inserted
//! right after that first line.

use std::sync::LazyLock;

use redis::Script;

/// The helpers every queue script shares, in seven parts (each uses the ones before it).
const PRELUDE: [&str; 7] = [
    include_str!("scripts/prelude.lua"),
    include_str!("scripts/events.lua"),
    include_str!("scripts/groups.lua"),
    include_str!("scripts/retention.lua"),
    include_str!("scripts/expiry.lua"),
    include_str!("scripts/buckets.lua"),
    include_str!("scripts/pending.lua"),
];

/// All scripts, compiled once per process.
pub(crate) struct Scripts {
    pub(crate) send: Script,
    pub(crate) add_records: Script,
    pub(crate) claim: Script,
    pub(crate) ack: Script,
    pub(crate) nack: Script,
    pub(crate) extend: Script,
    pub(crate) cancel: Script,
    pub(crate) reschedule: Script,
    pub(crate) get: Script,
    pub(crate) browse: Script,
    pub(crate) add_history: Script,
    pub(crate) stats: Script,
    pub(crate) dead_list: Script,
    pub(crate) dead_requeue: Script,
    pub(crate) dead_purge: Script,
    pub(crate) bury: Script,
    pub(crate) control: Script,
    pub(crate) push_target: Script,
    pub(crate) group_control: Script,
    pub(crate) group_info: Script,
    pub(crate) group_list: Script,
    /// Not queue scripts: they need no prelude.
    pub(crate) partitions: Script,
    pub(crate) announce: Script,
    pub(crate) stamp_format: Script,
    pub(crate) schedule_pause: Script,
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    send: with_prelude(include_str!("scripts/send.lua")),
    add_records: with_prelude(include_str!("scripts/add_records.lua")),
    claim: with_prelude(include_str!("scripts/claim.lua")),
    ack: with_prelude(include_str!("scripts/ack.lua")),
    nack: with_prelude(include_str!("scripts/nack.lua")),
    extend: with_prelude(include_str!("scripts/extend.lua")),
    cancel: with_prelude(include_str!("scripts/cancel.lua")),
    reschedule: with_prelude(include_str!("scripts/reschedule.lua")),
    get: with_prelude(include_str!("scripts/get.lua")),
    browse: with_prelude(include_str!("scripts/browse.lua")),
    add_history: with_prelude(include_str!("scripts/add_history.lua")),
    stats: with_prelude(include_str!("scripts/stats.lua")),
    dead_list: with_prelude(include_str!("scripts/dead_list.lua")),
    dead_requeue: with_prelude(include_str!("scripts/dead_requeue.lua")),
    dead_purge: with_prelude(include_str!("scripts/dead_purge.lua")),
    bury: with_prelude(include_str!("scripts/bury.lua")),
    control: with_prelude(include_str!("scripts/control.lua")),
    push_target: with_prelude(include_str!("scripts/push_target.lua")),
    group_control: with_prelude(include_str!("scripts/group_control.lua")),
    group_info: with_prelude(include_str!("scripts/group_info.lua")),
    group_list: with_prelude(include_str!("scripts/group_list.lua")),
    partitions: Script::new(include_str!("scripts/partitions.lua")),
    announce: Script::new(include_str!("scripts/announce.lua")),
    stamp_format: Script::new(include_str!("scripts/stamp_format.lua")),
    schedule_pause: Script::new(include_str!("scripts/schedule_pause.lua")),
});

fn with_prelude(source: &str) -> Script {
    let (shebang, body) = source.split_once('\n').unwrap_or((source, ""));
    debug_assert!(
        shebang.starts_with("#!lua"),
        "every script starts with #!lua"
    );
    Script::new(&format!("{shebang}\n{}\n{body}", PRELUDE.join("\n")))
}

#[cfg(test)]
mod tests;
