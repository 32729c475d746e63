//! Which queues a token may touch: every queue (a token without a scope, as every token
//! was before scopes), or those its line in the tokens file names: exact queue names and
//! prefix patterns (`orders.*`: every queue whose name starts with `orders.`).

use std::fmt;

/// A token's queues. `Scope::default()` is every queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope(Option<Vec<Pattern>>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Prefix(String),
}

impl Scope {
    /// Reads a comma-separated list of queue names and prefix patterns (a name's start, then
    /// `*`); `*` alone is every queue. Each must be made of a queue name's characters.
    pub fn parse(list: &str) -> Result<Scope, String> {
        let mut patterns = Vec::new();
        for item in list.split(',').map(str::trim) {
            if item == "*" {
                return Ok(Scope(None));
            }
            let (body, prefix) = match item.strip_suffix('*') {
                Some(start) => (start, true),
                None => (item, false),
            };
            if body.is_empty() {
                return Err("an empty queue pattern".to_owned());
            }
            if body.len() > delayq::MAX_QUEUE_NAME_LEN
                || !body
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            {
                return Err(format!(
                    "queue pattern {item:?}: a queue name (A-Z, a-z, 0-9, '.', '_', '-', \
                     up to 64), or the start of one followed by '*'"
                ));
            }
            patterns.push(match prefix {
                true => Pattern::Prefix(body.to_owned()),
                false => Pattern::Exact(body.to_owned()),
            });
        }
        Ok(Scope(Some(patterns)))
    }

    /// Whether the token may touch queue `name`.
    pub fn allows(&self, name: &str) -> bool {
        match &self.0 {
            None => true,
            Some(patterns) => patterns.iter().any(|p| match p {
                Pattern::Exact(q) => q == name,
                Pattern::Prefix(start) => name.starts_with(start.as_str()),
            }),
        }
    }

    /// True for a token without a scope: every queue, and what concerns no queue in
    /// particular (the processes, `/metrics` whole).
    pub fn is_every_queue(&self) -> bool {
        self.0.is_none()
    }
}

/// As the tokens file writes it: `*`, or the list.
impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(patterns) = &self.0 else {
            return f.write_str("*");
        };
        let parts: Vec<String> = patterns
            .iter()
            .map(|p| match p {
                Pattern::Exact(q) => q.clone(),
                Pattern::Prefix(start) => format!("{start}*"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_prefixes_match_as_written() {
        let s = Scope::parse("orders.*, billing").expect("valid");
        assert!(s.allows("orders.eu"));
        assert!(s.allows("orders."));
        assert!(!s.allows("orders"), "the prefix includes its dot");
        assert!(s.allows("billing"));
        assert!(!s.allows("billing.eu"), "an exact name is exact");
        assert!(!s.allows("b.x"));
        assert!(!s.is_every_queue());
        assert_eq!(s.to_string(), "orders.*,billing");
        assert!(Scope::parse("*").expect("all").is_every_queue());
        assert!(Scope::default().allows("anything"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in ["", "a,,b", "a*b", "*a", "a b", "a/b", &"x".repeat(65)] {
            assert!(Scope::parse(bad).is_err(), "{bad:?}");
        }
    }
}
