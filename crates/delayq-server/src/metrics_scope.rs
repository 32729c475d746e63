//! `/metrics` for a token scoped to some queues: the exposition text with the samples of
//! other queues taken out (a sample's `queue` label names its queue), and those of no queue
//! (the server's own) kept.

use crate::auth::Scope;

/// `text` (Prometheus exposition format) without the samples whose `queue` label is out of
/// `scope`.
pub fn in_scope(text: &str, scope: &Scope) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let keep = line.starts_with('#') || queue_label(line).is_none_or(|q| scope.allows(&q));
        if keep {
            out.push_str(line);
        }
    }
    out
}

/// The value of a sample line's `queue` label, if it has one. Label values are read with
/// their escapes (`\"`, `\\`, `\n`), so a quote inside another label's value cannot pass
/// for the end of it.
fn queue_label(line: &str) -> Option<String> {
    let labels = &line[line.find('{')? + 1..];
    let mut rest = labels;
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.starts_with('}') || rest.is_empty() {
            return None;
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim();
        let mut value = String::new();
        let mut chars = rest[eq + 1..].strip_prefix('"')?.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        if name == "queue" {
            return Some(value);
        }
        rest = &rest[eq + 1..][end + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_queues_samples_go_and_the_rest_stay() {
        let text = "# HELP delayq_messages Messages by state\n\
                    # TYPE delayq_messages gauge\n\
                    delayq_messages{queue=\"a.x\",state=\"ready\"} 3\n\
                    delayq_messages{state=\"ready\",queue=\"b.x\"} 4\n\
                    delayq_fake{note=\"queue=\\\"a.y\\\"\",queue=\"b.y\"} 1\n\
                    delayq_redis_up 1\n\
                    delayq_http{route=\"/v1/queues/{queue}\"} 2\n";
        let scope = Scope::parse("a.*").expect("scope");
        let kept = in_scope(text, &scope);
        assert!(kept.contains("queue=\"a.x\""));
        assert!(!kept.contains("b.x"));
        assert!(
            !kept.contains("b.y"),
            "a quote inside another label is no end"
        );
        assert!(kept.contains("delayq_redis_up 1"));
        assert!(kept.contains("delayq_http"));
        assert!(kept.contains("# TYPE delayq_messages gauge"));
    }
}
