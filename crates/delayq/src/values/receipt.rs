//! Receipts: how a consumer that cannot keep a [`Delivery`] around (an HTTP client, a
//! process that hands work to another) names a delivery to settle it: the message id and its
//! lease, as one opaque string, like an SQS receipt handle.

use std::fmt;
use std::str::FromStr;

use crate::values::delivery::Delivery;
use crate::values::error::InvalidInput;
use crate::values::names::check_lookup_id;

/// Names one delivery for ack, nack, extend and release. Its text form (`Display`,
/// `FromStr`) is opaque: clients store it and hand it back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Receipt {
    pub(crate) id: String,
    pub(crate) seq: [u8; 6],
    pub(crate) token: u64,
    pub(crate) explicit_id: bool,
    /// The message's stored payload is sealed (`sealing.rs`): a new payload for its next
    /// attempts is sealed too.
    pub(crate) sealed: bool,
}

impl Receipt {
    /// The message id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Delivery {
    /// The receipt that names this delivery.
    pub fn receipt(&self) -> Receipt {
        Receipt {
            id: self.id.clone(),
            seq: self.seq,
            token: self.token,
            explicit_id: self.explicit_id,
            sealed: self.sealed,
        }
    }
}

/// Text form: 12 hex digits of token, 12 of sequence, `e` or `g` (explicit or generated
/// id; `E` or `G` when its payload is sealed), then the id.
impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written digit by digit: `write!` with padded hex was a tenth of the HTTP
        // server's work per delivery (issue 30).
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let seq = self.seq.iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
        let mut head = [0u8; 25];
        for (i, value) in [self.token, seq].into_iter().enumerate() {
            for (j, digit) in head[i * 12..(i + 1) * 12].iter_mut().rev().enumerate() {
                *digit = HEX[((value >> (4 * j)) & 0xf) as usize];
            }
        }
        head[24] = match (self.explicit_id, self.sealed) {
            (true, false) => b'e',
            (false, false) => b'g',
            (true, true) => b'E',
            (false, true) => b'G',
        };
        // Only ASCII was written.
        f.write_str(std::str::from_utf8(&head).map_err(|_| fmt::Error)?)?;
        f.write_str(&self.id)
    }
}

impl FromStr for Receipt {
    type Err = InvalidInput;

    fn from_str(s: &str) -> Result<Self, InvalidInput> {
        let bad = || InvalidInput::Receipt {
            receipt: s.chars().take(200).collect(),
        };
        let hex = |part: Option<&str>| {
            part.filter(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|p| u64::from_str_radix(p, 16).ok())
        };
        let token = hex(s.get(..12)).ok_or_else(bad)?;
        let seq = hex(s.get(12..24)).ok_or_else(bad)?;
        let (explicit_id, sealed) = match s.get(24..25) {
            Some("e") => (true, false),
            Some("g") => (false, false),
            Some("E") => (true, true),
            Some("G") => (false, true),
            _ => return Err(bad()),
        };
        let id = s.get(25..).ok_or_else(bad)?;
        check_lookup_id(id).map_err(|_| bad())?;
        let mut seq_bytes = [0u8; 6];
        seq_bytes.copy_from_slice(&seq.to_be_bytes()[2..]);
        Ok(Receipt {
            id: id.to_owned(),
            seq: seq_bytes,
            token,
            explicit_id,
            sealed,
        })
    }
}

/// What settling needs of a delivery, from a [`Delivery`] or a [`Receipt`].
pub(crate) trait Held {
    fn lease_member(&self) -> [u8; 12];
    fn id(&self) -> &str;
    fn explicit_id(&self) -> bool;

    /// Whether the message's stored payload is sealed.
    fn sealed(&self) -> bool;

    /// The `traceparent` the message carries, when the holder knows it (a delivery does, a
    /// receipt does not): the trace its ack or nack span joins.
    fn traceparent(&self) -> Option<&str> {
        None
    }

    /// The message's sequence bytes, which name its partition.
    fn seq(&self) -> [u8; 6] {
        let mut seq = [0u8; 6];
        seq.copy_from_slice(&self.lease_member()[..6]);
        seq
    }
}

/// A delivery with something about it (a failure to report) is held as the delivery is.
impl<T> Held for (&Delivery, T) {
    fn lease_member(&self) -> [u8; 12] {
        self.0.lease_member()
    }

    fn id(&self) -> &str {
        &self.0.id
    }

    fn explicit_id(&self) -> bool {
        self.0.explicit_id
    }

    fn sealed(&self) -> bool {
        self.0.sealed
    }

    fn traceparent(&self) -> Option<&str> {
        self.0.traceparent.as_deref()
    }
}

impl Held for Delivery {
    fn lease_member(&self) -> [u8; 12] {
        crate::values::record::lease_member(self.seq, self.token)
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn explicit_id(&self) -> bool {
        self.explicit_id
    }

    fn sealed(&self) -> bool {
        self.sealed
    }

    fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }
}

impl Held for Receipt {
    fn lease_member(&self) -> [u8; 12] {
        crate::values::record::lease_member(self.seq, self.token)
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn explicit_id(&self) -> bool {
        self.explicit_id
    }

    fn sealed(&self) -> bool {
        self.sealed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_rejects_garbage() {
        let r = Receipt {
            id: "order-1:close".into(),
            seq: [0, 0, 0, 1, 2, 3],
            token: 0xabcdef012345,
            explicit_id: true,
            sealed: false,
        };
        let text = r.to_string();
        assert_eq!(text, "abcdef012345000000010203eorder-1:close");
        assert_eq!(text.parse::<Receipt>(), Ok(r));
        let small = Receipt {
            id: "7".into(),
            seq: [0, 0, 0, 0, 0, 1],
            token: 0x1f,
            explicit_id: false,
            sealed: false,
        };
        assert_eq!(small.to_string(), "00000000001f000000000001g7");
        assert_eq!(small.to_string().parse::<Receipt>(), Ok(small.clone()));
        let sealed = Receipt {
            sealed: true,
            ..small
        };
        assert_eq!(sealed.to_string(), "00000000001f000000000001G7");
        assert_eq!(sealed.to_string().parse::<Receipt>(), Ok(sealed));
        for bad in [
            "",
            "abc",
            "zzzzzzzzzzzz000000010203eid",
            "abcdef012345000000010203xid",
            "abcdef012345000000010203e",
            "abcdef012345000000010203ebad id",
        ] {
            assert!(bad.parse::<Receipt>().is_err(), "{bad:?} accepted");
        }
    }
}
