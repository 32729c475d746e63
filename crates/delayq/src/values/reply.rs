//! Reading script replies. Scripts return flat arrays; this walks one and turns a reply of the
//! wrong shape into `Error::Protocol` instead of a panic.

use redis::Value;

use crate::values::error::{Error, Result};
use crate::values::state::State;

pub(crate) struct Reply(std::vec::IntoIter<Value>);

impl Reply {
    pub(crate) fn new(value: Value) -> Result<Self> {
        match value {
            Value::Array(items) => Ok(Reply(items.into_iter())),
            other => Err(Error::Protocol(format!("expected an array, got {other:?}"))),
        }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.0.len()
    }

    fn next(&mut self) -> Result<Value> {
        self.0
            .next()
            .ok_or_else(|| Error::Protocol("reply is shorter than expected".into()))
    }

    pub(crate) fn int(&mut self) -> Result<i64> {
        match self.next()? {
            Value::Int(n) => Ok(n),
            other => Err(Error::Protocol(format!(
                "expected an integer, got {other:?}"
            ))),
        }
    }

    pub(crate) fn uint(&mut self) -> Result<u64> {
        let n = self.int()?;
        u64::try_from(n).map_err(|_| Error::Protocol(format!("expected a count, got {n}")))
    }

    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>> {
        match self.next()? {
            Value::BulkString(b) => Ok(b),
            Value::SimpleString(s) => Ok(s.into_bytes()),
            other => Err(Error::Protocol(format!("expected a string, got {other:?}"))),
        }
    }

    /// Bytes, or `None` where the script returned `false`.
    pub(crate) fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>> {
        match self.next()? {
            Value::Nil => Ok(None),
            Value::BulkString(b) => Ok(Some(b)),
            other => Err(Error::Protocol(format!("expected a string, got {other:?}"))),
        }
    }

    pub(crate) fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|e| Error::Protocol(format!("expected text: {e}")))
    }

    /// A string, or `None` where the script returned `false`.
    pub(crate) fn opt_string(&mut self) -> Result<Option<String>> {
        match self.next()? {
            Value::Nil => Ok(None),
            Value::BulkString(b) => String::from_utf8(b)
                .map(Some)
                .map_err(|e| Error::Protocol(format!("expected text: {e}"))),
            other => Err(Error::Protocol(format!("expected a string, got {other:?}"))),
        }
    }

    /// A nested array, to be read on its own.
    pub(crate) fn array(&mut self) -> Result<Reply> {
        Reply::new(self.next()?)
    }

    /// The rest, each an integer that is 1 for yes (an ack's reply per delivery).
    pub(crate) fn flags(mut self) -> Result<Vec<bool>> {
        let mut out = Vec::with_capacity(self.remaining());
        while self.remaining() > 0 {
            out.push(self.int()? == 1);
        }
        Ok(out)
    }
}

/// A state as scripts report it, where `missing` means no such message.
pub(crate) fn parse_state(s: &str) -> Result<Option<State>> {
    match s {
        "missing" => Ok(None),
        s => s.parse().map(Some).map_err(Error::Protocol),
    }
}
