//! The file format of the checked-in data sets (`data_sets/*.tsv`): one line per string, set
//! member, hash field or sorted set member, tab-separated: `kind key pttl item [value]`.
//! Keys are text; items and values are hex, since records are binary; scores are Redis's
//! own text; `pttl` is -1 for no expiry. `dump` writes every key of a server so;
//! `load` writes a file back into one.

use std::collections::BTreeMap;

use delayq::DelayQ;
use redis::Value;

/// Every key of the server, as the lines of a data set file, sorted.
pub(crate) async fn dump(dq: &DelayQ) -> String {
    let mut conn = dq.redis();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .expect("keys");
    let mut lines = Vec::new();
    // The registry of processes is the writer's own announcement, not the data.
    for key in keys.into_iter().filter(|k| k != "dq:processes") {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("type");
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .expect("pttl");
        let line = |rest: String| format!("{kind}\t{key}\t{pttl}\t{rest}");
        match kind.as_str() {
            "string" => {
                let v: Vec<u8> = redis::cmd("GET")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("get");
                lines.push(line(hex(&v)));
            }
            "set" => {
                let members: Vec<Vec<u8>> = redis::cmd("SMEMBERS")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("smembers");
                lines.extend(members.iter().map(|m| line(hex(m))));
            }
            "hash" => {
                let fields: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .expect("hgetall");
                lines.extend(
                    fields
                        .iter()
                        .map(|(f, v)| line(format!("{}\t{}", hex(f), hex(v)))),
                );
            }
            "zset" => {
                let members: Vec<(Vec<u8>, String)> = redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(&mut conn)
                    .await
                    .expect("zrange");
                lines.extend(
                    members
                        .iter()
                        .map(|(m, s)| line(format!("{}\t{s}", hex(m)))),
                );
            }
            "list" => {
                // Buckets (format 5): each item with its position, so the order survives the
                // sort below.
                let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
                    .expect("lrange");
                lines.extend(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| line(format!("{i:06}\t{}", hex(item)))),
                );
            }
            other => panic!("key {key} of type {other}: the writer knows no such type"),
        }
    }
    lines.sort();
    let mut text =
        String::from("# delayq data set: every key, one item a line (see data_sets.rs)\n");
    for l in lines {
        text.push_str(&l);
        text.push('\n');
    }
    text
}

/// Writes the data set `text` into the server, expiries included.
pub(crate) async fn load(dq: &DelayQ, text: &str) {
    let mut conn = dq.redis();
    let mut expiries = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let parts: Vec<&str> = line.split('\t').collect();
        let (kind, key, pttl) = (parts[0], parts[1], parts[2]);
        let mut cmd = match kind {
            "string" => redis::cmd("SET"),
            "set" => redis::cmd("SADD"),
            "hash" => redis::cmd("HSET"),
            "zset" => redis::cmd("ZADD"),
            "list" => redis::cmd("RPUSH"),
            other => panic!("unknown kind {other}"),
        };
        cmd.arg(key);
        match kind {
            "zset" => cmd.arg(parts[4]).arg(unhex(parts[3])),
            "list" => cmd.arg(unhex(parts[4])),
            "hash" => cmd.arg(unhex(parts[3])).arg(unhex(parts[4])),
            _ => cmd.arg(unhex(parts[3])),
        };
        let _: Value = cmd.query_async(&mut conn).await.expect(line);
        let pttl: i64 = pttl.parse().expect("pttl");
        if pttl > 0 {
            expiries.insert(key.to_owned(), pttl);
        }
    }
    for (key, pttl) in expiries {
        let _: Value = redis::cmd("PEXPIRE")
            .arg(&key)
            .arg(pttl)
            .query_async(&mut conn)
            .await
            .expect("pexpire");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}
