//! The Lua scripts, one file each under `scripts/`. Every state change of a queue is one of
//! these scripts, so it is atomic without any lock.
//!
//! Each script starts with `#!lua`, with `flags=allow-oom` where it drains or frees (it must
//! work when Redis is at `maxmemory`) or `flags=no-writes` where it only reads; scripts
//! without a flag (send, reschedule, requeue) are refused at `maxmemory`.
//!
//! The *queue scripts* share helpers: `prelude.lua`, `leases.lua`, `events.lua`, `groups.lua`,
//! `retention.lua`, `expiry.lua`, `buckets.lua`, `pending.lua` and `acking.lua`, then `call_state.lua`,
//! whose `begin_call` sets what belongs to one call. They reach Redis in two forms, built
//! here from the same text:
//! * **One Functions library** (the normal way, `script_call.rs`): `delayq_<hash>`, every
//!   queue script a function `delayq_<hash>_<script>`. Loading it compiles and makes the
//!   helpers once per server; a call then runs only its script's own code. The hash is of
//!   the library's code, so two delayq versions on one server each keep their own.
//! * **A script each**, the helpers inserted after its `#!lua` line, for a server that
//!   refuses `FUNCTION LOAD`: each `EVALSHA` makes every helper again (measured in
//!   BENCHMARKS.md, issue 33: about 36 µs of Redis CPU a call).
//!
//! The five scripts that need no helpers are run by `EVALSHA` only: each runs about once
//! per queue and client.

use std::sync::{LazyLock, OnceLock};

use redis::Script;

/// The helpers every queue script shares, in their order (each uses the ones before it).
const HELPERS: [&str; 10] = [
    include_str!("scripts/prelude.lua"),
    include_str!("scripts/leases.lua"),
    include_str!("scripts/events.lua"),
    include_str!("scripts/groups.lua"),
    include_str!("scripts/retention.lua"),
    include_str!("scripts/expiry.lua"),
    include_str!("scripts/buckets.lua"),
    include_str!("scripts/pending.lua"),
    include_str!("scripts/acking.lua"),
    include_str!("scripts/call_state.lua"),
];

/// Every queue script: its name (in its function's name) and its text.
const QUEUE_SCRIPTS: [(&str, &str); 24] = [
    ("send", include_str!("scripts/send.lua")),
    ("add_records", include_str!("scripts/add_records.lua")),
    ("claim", include_str!("scripts/claim.lua")),
    ("ack", include_str!("scripts/ack.lua")),
    ("nack", include_str!("scripts/nack.lua")),
    ("extend", include_str!("scripts/extend.lua")),
    ("cancel", include_str!("scripts/cancel.lua")),
    ("reschedule", include_str!("scripts/reschedule.lua")),
    ("get", include_str!("scripts/get.lua")),
    ("browse", include_str!("scripts/browse.lua")),
    ("add_history", include_str!("scripts/add_history.lua")),
    ("stats", include_str!("scripts/stats.lua")),
    ("dead_list", include_str!("scripts/dead_list.lua")),
    ("dead_requeue", include_str!("scripts/dead_requeue.lua")),
    ("dead_purge", include_str!("scripts/dead_purge.lua")),
    ("drop_keys", include_str!("scripts/drop_keys.lua")),
    ("bury", include_str!("scripts/bury.lua")),
    ("control", include_str!("scripts/control.lua")),
    ("push_target", include_str!("scripts/push_target.lua")),
    ("group_control", include_str!("scripts/group_control.lua")),
    ("group_info", include_str!("scripts/group_info.lua")),
    ("group_list", include_str!("scripts/group_list.lua")),
    ("reseal_scan", include_str!("scripts/reseal_scan.lua")),
    ("reseal", include_str!("scripts/reseal.lua")),
];

/// Stands for the library's hash in its code until the hash is known.
const HASH_PLACEHOLDER: &str = "@HASH@";

/// A queue script, in both of its forms.
pub(crate) struct QueueScript {
    /// Its function in the [`Library`].
    pub(crate) function: String,
    /// Its code in [`QUEUE_SCRIPTS`].
    source: &'static str,
    /// The same code as a script of its own, helpers included, made the first time the
    /// `EVALSHA` fallback needs it: each is the whole library's helpers again, and making
    /// (and hashing) them all took about 8 ms of the first call of every process.
    script: OnceLock<Script>,
}

/// delayq's Functions library: its name, and the code `FUNCTION LOAD` takes.
pub(crate) struct Library {
    pub(crate) name: String,
    pub(crate) code: String,
}

/// All scripts, built once per process.
pub(crate) struct Scripts {
    pub(crate) library: Library,
    pub(crate) send: QueueScript,
    pub(crate) add_records: QueueScript,
    pub(crate) claim: QueueScript,
    pub(crate) ack: QueueScript,
    pub(crate) nack: QueueScript,
    pub(crate) extend: QueueScript,
    pub(crate) cancel: QueueScript,
    pub(crate) reschedule: QueueScript,
    pub(crate) get: QueueScript,
    pub(crate) browse: QueueScript,
    pub(crate) add_history: QueueScript,
    pub(crate) stats: QueueScript,
    pub(crate) dead_list: QueueScript,
    pub(crate) dead_requeue: QueueScript,
    pub(crate) dead_purge: QueueScript,
    pub(crate) drop_keys: QueueScript,
    pub(crate) bury: QueueScript,
    pub(crate) control: QueueScript,
    pub(crate) push_target: QueueScript,
    pub(crate) group_control: QueueScript,
    pub(crate) group_info: QueueScript,
    pub(crate) group_list: QueueScript,
    pub(crate) reseal_scan: QueueScript,
    pub(crate) reseal: QueueScript,
    /// Not queue scripts: they need no helpers.
    pub(crate) partitions: Script,
    pub(crate) announce: Script,
    pub(crate) stamp_format: Script,
    pub(crate) schedule_pause: Script,
    pub(crate) schedule_reseal: Script,
}

pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    let library = Library::build();
    let hash = library.hash();
    let q = |name: &str| QueueScript::new(name, &hash);
    Scripts {
        send: q("send"),
        add_records: q("add_records"),
        claim: q("claim"),
        ack: q("ack"),
        nack: q("nack"),
        extend: q("extend"),
        cancel: q("cancel"),
        reschedule: q("reschedule"),
        get: q("get"),
        browse: q("browse"),
        add_history: q("add_history"),
        stats: q("stats"),
        dead_list: q("dead_list"),
        dead_requeue: q("dead_requeue"),
        dead_purge: q("dead_purge"),
        drop_keys: q("drop_keys"),
        bury: q("bury"),
        control: q("control"),
        push_target: q("push_target"),
        group_control: q("group_control"),
        group_info: q("group_info"),
        group_list: q("group_list"),
        reseal_scan: q("reseal_scan"),
        reseal: q("reseal"),
        library,
        partitions: Script::new(include_str!("scripts/partitions.lua")),
        announce: Script::new(include_str!("scripts/announce.lua")),
        stamp_format: Script::new(include_str!("scripts/stamp_format.lua")),
        schedule_pause: Script::new(include_str!("scripts/schedule_pause.lua")),
        schedule_reseal: Script::new(include_str!("scripts/schedule_reseal.lua")),
    }
});

impl Library {
    /// The library's code: the helpers once, then each queue script registered as a
    /// function whose body is the script's code after `begin_call`.
    fn build() -> Library {
        let mut code = format!(
            "#!lua name=delayq_{HASH_PLACEHOLDER}\n{}\n",
            HELPERS.join("\n")
        );
        for (name, source) in QUEUE_SCRIPTS {
            let (shebang, body) = split_shebang(source);
            let flags: Vec<String> = script_flags(shebang)
                .map(|flag| format!("'{flag}'"))
                .collect();
            code.push_str(&format!(
                "redis.register_function{{function_name = '{}', flags = {{{}}}, \
                 callback = function(keys, argv)\nbegin_call(keys, argv)\n{body}\nend}}\n",
                function_name(HASH_PLACEHOLDER, name),
                flags.join(", "),
            ));
        }
        // The hash names this exact code: a server may hold several delayq versions' libraries.
        let hash = Script::new(&code).get_hash()[..16].to_owned();
        Library {
            name: format!("delayq_{hash}"),
            code: code.replace(HASH_PLACEHOLDER, &hash),
        }
    }

    fn hash(&self) -> String {
        self.name["delayq_".len()..].to_owned()
    }
}

impl QueueScript {
    fn new(name: &str, hash: &str) -> QueueScript {
        let source = QUEUE_SCRIPTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, source)| *source)
            .unwrap_or_else(|| panic!("no queue script {name}"));
        QueueScript {
            function: function_name(hash, name),
            source,
            script: OnceLock::new(),
        }
    }

    /// The script of its own, for `EVALSHA`.
    pub(crate) fn script(&self) -> &Script {
        self.script.get_or_init(|| {
            let (shebang, body) = split_shebang(self.source);
            // Its KEYS and ARGV are the globals; the helpers' own (per call) shadow them.
            Script::new(&format!(
                "{shebang}\nlocal CALL_KEYS, CALL_ARGV = KEYS, ARGV\n{}\n\
                 begin_call(CALL_KEYS, CALL_ARGV)\n{body}",
                HELPERS.join("\n")
            ))
        })
    }

    /// Whether its `EVALSHA` script was made.
    #[cfg(test)]
    pub(crate) fn script_made(&self) -> bool {
        self.script.get().is_some()
    }
}

fn function_name(hash: &str, script: &str) -> String {
    format!("delayq_{hash}_{script}")
}

/// A script's `#!lua` line, and the rest.
fn split_shebang(source: &str) -> (&str, &str) {
    let (shebang, body) = source.split_once('\n').unwrap_or((source, ""));
    debug_assert!(
        shebang.starts_with("#!lua"),
        "every script starts with #!lua"
    );
    (shebang, body)
}

/// The flags of a `#!lua flags=a,b` line.
fn script_flags(shebang: &str) -> impl Iterator<Item = &str> {
    shebang
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("flags="))
        .flat_map(|flags| flags.split(','))
        .filter(|flag| !flag.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first call of a process that uses `FCALL` made every script's `EVALSHA` form
    /// (the helpers again, and their hash, for each of 22 scripts): about 8 ms spent
    /// before its first command reached Redis. Each is made once it is needed.
    #[test]
    fn a_scripts_evalsha_form_is_made_only_when_needed() {
        let claim = QueueScript::new("claim", "0123456789abcdef");
        assert_eq!(claim.function, "delayq_0123456789abcdef_claim");
        assert!(!claim.script_made());
        let hash = claim.script().get_hash().to_owned();
        assert!(claim.script_made());
        assert_eq!(claim.script().get_hash(), hash, "made once");
        let body = include_str!("scripts/claim.lua");
        let (_, body) = split_shebang(body);
        let made = QueueScript::new("claim", "0123456789abcdef");
        let expected = Script::new(&format!(
            "#!lua flags=allow-oom\nlocal CALL_KEYS, CALL_ARGV = KEYS, ARGV\n{}\n\
             begin_call(CALL_KEYS, CALL_ARGV)\n{body}",
            HELPERS.join("\n")
        ));
        assert_eq!(made.script().get_hash(), expected.get_hash());
    }
}
