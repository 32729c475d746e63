//! Reads a batch send's body (`{"messages": [...]}`) as a stream: each message is turned
//! into the library's [`Message`] as soon as it is parsed, so no `Vec` of whole
//! [`SendBody`] structs (every send option, hundreds of bytes each) is built, grown and moved
//! again (issue 30: moving them was a sixth of the server's CPU under batch sends).
//!
//! The outcome is the same as parsing the whole body first: malformed JSON anywhere wins
//! over a batch over the limit, which wins over the first invalid message (named by its
//! index).

use std::fmt;

use delayq::Message;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserializer;

use super::wire::SendBody;
use crate::error::{ApiError, ApiResult};
use crate::limits::Limits;

/// A batch read from its body: its messages, and the push URLs they name.
pub struct Batch {
    pub messages: Vec<Message>,
    pub urls: Vec<String>,
}

/// Reads `body`; `traceparent` is the request's header, which every message without its
/// own carries.
pub fn read_batch(body: &[u8], limits: &Limits, traceparent: Option<&str>) -> ApiResult<Batch> {
    let mut reader = Reader {
        limits,
        traceparent,
        batch: Batch {
            // The shortest message (`{"payload":0},`) takes 14 bytes.
            messages: Vec::with_capacity((body.len() / 14).min(limits.max_batch)),
            urls: Vec::new(),
        },
        count: 0,
        invalid: None,
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed = BodySeed(&mut reader)
        .deserialize(&mut de)
        .and_then(|()| de.end());
    parsed.map_err(|e| ApiError::bad_request("malformed_json", e.to_string()))?;
    limits.check_batch(reader.count)?;
    match reader.invalid {
        Some(e) => Err(e),
        None => Ok(reader.batch),
    }
}

struct Reader<'a> {
    limits: &'a Limits,
    traceparent: Option<&'a str>,
    batch: Batch,
    /// Messages in the body, converted or not.
    count: usize,
    /// The first message that could not be converted; nothing is converted after it.
    invalid: Option<ApiError>,
}

impl Reader<'_> {
    fn take(&mut self, mut body: SendBody) {
        let index = self.count;
        self.count += 1;
        if self.invalid.is_some() || self.limits.check_batch(self.count).is_err() {
            return;
        }
        if body.traceparent.is_none() {
            body.traceparent = self.traceparent.map(str::to_owned);
        }
        self.batch.urls.extend(super::push::message_url(&body));
        match body.into_message(self.limits) {
            Ok((payload, options)) => self.batch.messages.push(Message::new(payload, options)),
            Err(e) => self.invalid = Some(e.at(index)),
        }
    }
}

/// The body: an object whose one field is `messages` (an absent one reads as none).
struct BodySeed<'r, 'a>(&'r mut Reader<'a>);

impl<'de> DeserializeSeed<'de> for BodySeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for BodySeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object with the field `messages`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key != "messages" {
                return Err(de::Error::unknown_field(&key, &["messages"]));
            }
            if seen {
                return Err(de::Error::duplicate_field("messages"));
            }
            seen = true;
            map.next_value_seed(MessagesSeed(&mut *self.0))?;
        }
        if !seen {
            return Err(de::Error::missing_field("messages"));
        }
        Ok(())
    }
}

/// The `messages` array, converted element by element.
struct MessagesSeed<'r, 'a>(&'r mut Reader<'a>);

impl<'de> DeserializeSeed<'de> for MessagesSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for MessagesSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // Every message is parsed, even past the limit or an invalid one, so that JSON of
        // the wrong shape anywhere is reported as such.
        while let Some(body) = seq.next_element::<SendBody>()? {
            self.0.take(body);
        }
        Ok(())
    }
}
