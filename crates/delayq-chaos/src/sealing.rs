//! Payloads encrypted at rest in the cluster run (issue 54): the run makes a key file, and
//! every process it starts finds it in `DELAYQ_KEYS_FILE` (the servers' own flag, which the
//! producers, workers and the checker's lookups read too); the queue encrypts from its
//! creation. At the end no node may hold a payload in clear, and no message may have died
//! `undecryptable`: a failover or a kill must not make a payload unreadable.

use std::path::Path;

use redis_fixture::RedisServer;

/// Where every process of the run finds the key file.
const KEYS_ENV: &str = "DELAYQ_KEYS_FILE";

/// Makes the run's key file in `dir` and names it in this process's environment, which
/// every process it starts inherits.
pub fn make_keys(dir: &Path) -> Result<(), String> {
    let line = delayq::Keyring::new_key_line("chaos").map_err(|e| e.to_string())?;
    let path = dir.join("keys");
    std::fs::write(&path, line).map_err(|e| format!("{}: {e}", path.display()))?;
    std::env::set_var(KEYS_ENV, &path);
    Ok(())
}

/// `config` with the run's keys, when it has them.
pub fn config(config: delayq::Config) -> Result<delayq::Config, String> {
    match std::env::var(KEYS_ENV) {
        Ok(path) => {
            let keys = delayq::Keyring::load(Path::new(&path)).map_err(|e| e.to_string())?;
            Ok(config.keys(keys))
        }
        Err(_) => Ok(config),
    }
}

/// How many values of `nodes` hold a payload of the run in clear (`"nb":`, which every
/// payload's JSON has: `history.rs`), read raw by type (never `DUMP`, which may compress);
/// and how many values were read (a replica answers a read with MOVED: its master's are).
pub fn payloads_in_clear(nodes: &[RedisServer]) -> (usize, usize) {
    let (mut found, mut read_values) = (0, 0);
    for node in nodes {
        let Ok(keys) = node.command(&["KEYS", "*"]) else {
            continue;
        };
        for key in keys.render().lines().filter(|k| !k.is_empty()) {
            let kind = node
                .command(&["TYPE", key])
                .map(|r| r.render())
                .unwrap_or_default();
            let read: &[&str] = match kind.trim() {
                "string" => &["GET"],
                "hash" => &["HGETALL"],
                "zset" => &["ZRANGE", "0", "-1"],
                "list" => &["LRANGE", "0", "-1"],
                "set" => &["SMEMBERS"],
                "stream" => &["XRANGE", "-", "+"],
                _ => continue,
            };
            let mut args = vec![read[0], key];
            args.extend(&read[1..]);
            if let Ok(value) = node.command(&args) {
                let text = value.render();
                if !text.starts_with("(error)") {
                    read_values += 1;
                    found += usize::from(text.contains("\"nb\":"));
                }
            }
        }
    }
    (found, read_values)
}
