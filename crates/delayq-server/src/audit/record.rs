//! Where audit entries are kept and how they are read: the Redis stream `dq:audit`, one entry
//! per action (its stream id says when, to the millisecond), trimmed by `XADD ... MAXLEN ~`
//! to about the newest `--audit-max-entries`; read newest first, a page at a time.

use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::state::AppState;

/// The stream of entries.
pub const AUDIT_KEY: &str = "dq:audit";

/// Most ids one entry keeps (a cancel of many names up to a batch's): the rest are counted.
const MAX_IDS: usize = 100;

/// Most bytes of an entry's `from` (a peer's address and what a proxy forwarded for).
const MAX_FROM: usize = 256;

/// Cuts `text` to at most `most` bytes (at a character's boundary), marking the cut with `…`.
fn cut(text: &mut String, most: usize) {
    if text.len() > most {
        let mut end = most;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
}

/// One entry of the audit log.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Entry {
    /// Its place in the log (`<unix ms>-<n>`): the `before` of the next page.
    pub id: String,
    /// Who: the token's name, or `(no token)`, `(unknown token)`, `(not logged in)`,
    /// `(open server)` (no tokens configured), `(local cli)`, `(server)`.
    pub actor: String,
    /// Through what: `api`, `dashboard`, `cli` (the local CLI, on Redis), `server`.
    pub via: String,
    /// What: `purge`, `pause`, `cancel`, `tokens_reloaded`, ... (docs/operations.md lists them).
    pub action: String,
    /// Which queue ("" for none).
    pub queue: String,
    /// Which messages, schedules or groups, as named in the request.
    pub ids: Vec<String>,
    /// The peer's address, and what a proxy said it forwarded for.
    pub from: String,
    /// ok, refused (401 or 403) or failed.
    pub outcome: String,
    /// The HTTP status of the answer (0 for what no request did).
    pub status: u16,
}

/// Writes `entry` to the log, and to the stream unless the action failed with Redis away (503).
/// A failure to write it is logged: the action happened (or was refused) either way.
pub async fn write(state: &AppState, mut entry: Entry) {
    // What a request names comes from its client, refused ones too: each field is cut, so
    // that an entry stays within about 14 KiB (100 ids of 128 bytes) whatever was sent.
    if entry.ids.len() > MAX_IDS {
        let more = entry.ids.len() - MAX_IDS;
        entry.ids.truncate(MAX_IDS);
        entry.ids.push(format!("(and {more} more)"));
    }
    cut(&mut entry.queue, delayq::MAX_QUEUE_NAME_LEN);
    for id in &mut entry.ids {
        cut(id, delayq::MAX_MESSAGE_ID_LEN);
    }
    cut(&mut entry.from, MAX_FROM);
    tracing::info!(
        target: "audit",
        actor = %entry.actor,
        via = %entry.via,
        action = %entry.action,
        queue = %entry.queue,
        ids = %entry.ids.join(","),
        from = %entry.from,
        outcome = %entry.outcome,
        status = entry.status,
        "audit"
    );
    if entry.status == 503 {
        // The action failed because Redis did not answer in time: the entry would wait out
        // the same timeout again. The log has it.
        return;
    }
    let mut conn = state.dq().redis();
    let written: redis::RedisResult<String> = redis::cmd("XADD")
        .arg(AUDIT_KEY)
        .arg("MAXLEN")
        .arg("~")
        .arg(state.limits().audit_max_entries)
        .arg("*")
        .arg("actor")
        .arg(&entry.actor)
        .arg("via")
        .arg(&entry.via)
        .arg("action")
        .arg(&entry.action)
        .arg("queue")
        .arg(&entry.queue)
        .arg("ids")
        .arg(serde_json::to_string(&entry.ids).unwrap_or_default())
        .arg("from")
        .arg(&entry.from)
        .arg("outcome")
        .arg(&entry.outcome)
        .arg("status")
        .arg(entry.status)
        .query_async(&mut conn)
        .await;
    if let Err(e) = written {
        tracing::warn!(target: "audit", error = %e, action = %entry.action, "audit entry not kept in Redis");
    }
}

/// A page of the log, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct Page {
    /// The entries, newest first.
    pub entries: Vec<Entry>,
    /// The `before` of the next (older) page; absent at the log's start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Up to `limit` entries older than `before` (newest first), those of `queue` if given, and
/// of the queues `caller` may use: an admin of some queues sees entries of those only. Reads
/// at most 10 times `limit` entries for one page.
pub async fn read(
    state: &AppState,
    caller: Option<&Caller>,
    queue: Option<&str>,
    before: Option<&str>,
    limit: usize,
) -> delayq::Result<Page> {
    let mut conn = state.dq().redis();
    let mut entries = Vec::new();
    let mut end = match before {
        Some(id) => format!("({id}"),
        None => "+".to_owned(),
    };
    let mut scanned = 0;
    loop {
        let chunk: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(AUDIT_KEY)
            .arg(&end)
            .arg("-")
            .arg("COUNT")
            .arg(limit)
            .query_async(&mut conn)
            .await?;
        let whole = chunk.len() == limit;
        let mut last = String::new();
        for (id, fields) in chunk {
            scanned += 1;
            last.clone_from(&id);
            let entry = entry_of(id, fields);
            // A scoped admin sees its queues' entries, and none of what concerns no queue.
            let seen = match caller {
                Some(c) if !c.scope.is_every_queue() => {
                    !entry.queue.is_empty() && c.scope.allows(&entry.queue)
                }
                _ => true,
            };
            if seen && queue.is_none_or(|q| q == entry.queue) {
                entries.push(entry);
                if entries.len() == limit {
                    return Ok(Page {
                        entries,
                        next: Some(last),
                    });
                }
            }
        }
        if !whole {
            return Ok(Page {
                entries,
                next: None,
            });
        }
        if scanned >= 10 * limit {
            return Ok(Page {
                entries,
                next: Some(last),
            });
        }
        end = format!("({last}");
    }
}

fn entry_of(id: String, fields: Vec<(String, String)>) -> Entry {
    let mut entry = Entry {
        id,
        actor: String::new(),
        via: String::new(),
        action: String::new(),
        queue: String::new(),
        ids: Vec::new(),
        from: String::new(),
        outcome: String::new(),
        status: 0,
    };
    for (key, value) in fields {
        match key.as_str() {
            "actor" => entry.actor = value,
            "via" => entry.via = value,
            "action" => entry.action = value,
            "queue" => entry.queue = value,
            "ids" => entry.ids = serde_json::from_str(&value).unwrap_or_default(),
            "from" => entry.from = value,
            "outcome" => entry.outcome = value,
            "status" => entry.status = value.parse().unwrap_or(0),
            _ => {}
        }
    }
    entry
}
