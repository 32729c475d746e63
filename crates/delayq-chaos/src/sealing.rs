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
/// payload's JSON has: `history.rs`), read raw by type; and how many values were read (a
/// replica answers a read with MOVED: its master's are). A node that does not answer is
/// passed over.
pub fn payloads_in_clear(nodes: &[RedisServer]) -> (usize, usize) {
    let values: Vec<(String, String)> = nodes
        .iter()
        .filter(|node| node.command(&["PING"]).is_ok())
        .flat_map(RedisServer::every_value_read)
        .collect();
    let found = values.iter().filter(|(_, v)| v.contains("\"nb\":")).count();
    (found, values.len())
}
