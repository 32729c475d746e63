//! A walk of the keys that match a pattern: `SCAN` on the one server, or on every master of
//! a cluster, a page at a time, so that no call's work grows with the keyspace.

use crate::store::connection::{Node, Ordinary};
use crate::values::error::Result;

/// Keys asked for per `SCAN` call.
const PAGE: usize = 1000;

/// The walk: [`next_page`](Self::next_page) until it answers `None`.
pub(crate) struct KeyScan<'a> {
    conn: &'a Ordinary,
    pattern: String,
    /// The servers still to walk, the current one last.
    nodes: Vec<Node>,
    /// Where the current server's walk is (0: at its start).
    cursor: u64,
}

impl<'a> KeyScan<'a> {
    /// A walk of the keys that match `pattern` (as `SCAN MATCH` takes it).
    pub(crate) async fn new(conn: &'a Ordinary, pattern: String) -> Result<Self> {
        let mut nodes = conn.scan_targets().await?;
        nodes.reverse();
        Ok(KeyScan {
            conn,
            pattern,
            nodes,
            cursor: 0,
        })
    }

    /// The next page of keys (it may be empty), or `None` once every server is walked.
    pub(crate) async fn next_page(&mut self) -> Result<Option<Vec<String>>> {
        let Some(node) = self.nodes.last() else {
            return Ok(None);
        };
        let mut scan = redis::cmd("SCAN");
        scan.arg(self.cursor)
            .arg("MATCH")
            .arg(&self.pattern)
            .arg("COUNT")
            .arg(PAGE);
        let (next, keys): (u64, Vec<String>) = self.conn.query_on(node, &scan).await?;
        self.cursor = next;
        if next == 0 {
            self.nodes.pop();
        }
        Ok(Some(keys))
    }
}
