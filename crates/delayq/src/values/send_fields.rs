//! The fields a message's send options put in its record's extension area
//! (`extension.rs`), described once: what each writes, the data format a partition needs to
//! take it, and whether the send script must act on it. The record codec (`record.rs`), the
//! send's format gate and its choice of path (`handles/send.rs`) are built from
//! [`fields_of`]; a new option is a compile error there until it says which of them it is.

use crate::values::extension::{
    ENCRYPTION_FORMAT, EXPIRY_FORMAT, EXTENSION_FORMAT, GROUPS_FORMAT, SEALED_V1, TAG_DEADLINE,
    TAG_DEBOUNCE, TAG_GROUP, TAG_KEY, TAG_TRACE,
};
use crate::values::options::{SendOptions, DEFAULT_PRIORITY};
use crate::values::upsert::OnDuplicate;

/// One extension field of a message about to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendField<'o> {
    pub(crate) tag: u8,
    /// What the client writes (zeros where the send script writes a time by the server's clock).
    pub(crate) value: &'o [u8],
    /// The data format a partition must have to take it, and what to call messages that
    /// carry it when one is too old; `None`: any format with an extension area.
    pub(crate) format: Option<(u32, &'static str)>,
    /// Whether only the send script can write it (it reads the server's clock or the partition's
    /// state for it): a batch that carries it cannot take the path without Lua.
    pub(crate) needs_script: bool,
}

/// Eight zero bytes: a time that the send script writes by the server's clock.
const SERVER_TIME: &[u8; 8] = &[0; 8];

/// The extension fields of a message sent with `options`, in tag order.
pub(crate) fn fields_of(options: &SendOptions) -> Vec<SendField<'_>> {
    // Every option is named, so that a new one is a decision here: a field of its own, or
    // carried elsewhere in the record (the header, the policy) or not stored at all.
    let SendOptions {
        group,
        expiry,
        on_duplicate,
        traceparent,
        sealed,
        // The header and the policy (`record.rs`), or the sort key (priority, due time).
        schedule: _,
        id: _,
        max_attempts: _,
        backoff: _,
        kind: _,
        handler_timeout: _,
        priority: _,
        // How the send goes, not what is stored.
        replicas: _,
        if_in_flight: _,
    } = options;
    let mut fields = Vec::new();
    if let Some(group) = group {
        fields.push(SendField {
            tag: TAG_GROUP,
            value: group.as_bytes(),
            format: Some((GROUPS_FORMAT, "messages with a group")),
            needs_script: true,
        });
    }
    if expiry.is_some() {
        fields.push(SendField {
            tag: TAG_DEADLINE,
            value: SERVER_TIME,
            format: Some((EXPIRY_FORMAT, "messages with a deadline")),
            needs_script: true,
        });
    }
    if matches!(on_duplicate, OnDuplicate::Debounce { .. }) {
        fields.push(SendField {
            tag: TAG_DEBOUNCE,
            value: SERVER_TIME,
            // A debounce needs a caller id, so it goes by the send script, which refuses it on a
            // partition of format 1 (the send script's extension check).
            format: None,
            needs_script: true,
        });
    }
    if let Some(traceparent) = traceparent {
        fields.push(SendField {
            tag: TAG_TRACE,
            value: traceparent.as_bytes(),
            format: Some((EXTENSION_FORMAT, "messages with trace context")),
            needs_script: false,
        });
    }
    if *sealed {
        fields.push(SendField {
            tag: TAG_KEY,
            value: SEALED_V1,
            format: Some((ENCRYPTION_FORMAT, "encrypted messages")),
            // The path without Lua checks the queue's setting as the send script does.
            needs_script: false,
        });
    }
    fields
}

/// The newest data format that `fields` need, and what to call the messages that need it.
pub(crate) fn format_needed(fields: &[SendField<'_>]) -> Option<(u32, &'static str)> {
    fields
        .iter()
        .filter_map(|f| f.format)
        .max_by_key(|(format, _)| *format)
}

/// Whether a message sent with `options` may go by the batch path without Lua
/// (`handles/send_generated.rs`): no caller id (no duplicate to check), the default
/// priority (the default pending set) and no field that only the send script can write.
pub(crate) fn may_skip_script(options: &SendOptions) -> bool {
    options.id.is_none()
        && options.priority == DEFAULT_PRIORITY
        && fields_of(options).iter().all(|f| !f.needs_script)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn each_field_says_its_format_and_path() {
        let plain = SendOptions::new();
        assert!(fields_of(&plain).is_empty());
        assert!(may_skip_script(&plain));
        let traced = SendOptions::new()
            .traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        assert_eq!(
            format_needed(&fields_of(&traced)).map(|f| f.0),
            Some(EXTENSION_FORMAT)
        );
        assert!(
            may_skip_script(&traced),
            "trace context is written as it is"
        );
        let both = SendOptions::new()
            .group("g")
            .ttl(Duration::from_secs(60))
            .traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let fields = fields_of(&both);
        assert_eq!(
            fields.iter().map(|f| f.tag).collect::<Vec<_>>(),
            [TAG_GROUP, TAG_DEADLINE, TAG_TRACE],
            "in tag order"
        );
        assert_eq!(format_needed(&fields).map(|f| f.0), Some(EXPIRY_FORMAT));
        assert!(!may_skip_script(&both));
        assert!(!may_skip_script(&SendOptions::new().priority(9)));
        assert!(!may_skip_script(&SendOptions::new().id("x")));
    }
}
