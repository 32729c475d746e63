//! A queue's groups ([`SendOptions::group`](crate::SendOptions::group)): which there are,
//! largest first; what one holds; and one group's own settings (pause, a concurrency in
//! place of the queue's, a weight, a rate limit in place of the queue's). A group lives in one partition, named by the hash of
//! its name (`send.rs`), so each of these is one script call there, or one per partition
//! for the list.

use crate::handles::queue_core::{invocation, QueueCore};
use crate::store::partitions::{join_all, Layout};
use crate::store::scripts::SCRIPTS;
use crate::values::error::{Error, InvalidInput, Result};
use crate::values::message::RateLimit;
use crate::values::names::check_group;
use crate::values::options::check_count;
use crate::values::reply::Reply;
use crate::values::settings::{check_rate_limit, parse_limit, MAX_GROUP_CONCURRENCY};

/// Highest [`GroupSettings::weight`].
pub const MAX_GROUP_WEIGHT: u32 = 1000;

/// Deepest offset of a page of groups: each partition is read from its first group.
pub const MAX_GROUP_OFFSET: u64 = 10_000;

/// A group and how many messages it holds, as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    /// The group's name.
    pub name: String,
    /// Its messages pending (delayed or ready) and in flight.
    pub messages: u64,
}

/// A page of a queue's groups, most messages first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPage {
    /// Groups with messages, in all.
    pub total: u64,
    /// The page.
    pub groups: Vec<GroupSummary>,
}

/// What one group holds, and its settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupInfo {
    /// The group's name.
    pub name: String,
    /// Waiting for their due time, or for their retry.
    pub delayed: u64,
    /// Due and not yet claimed (some may wait for a free slot).
    pub ready: u64,
    /// Held under a lease.
    pub in_flight: u64,
    /// Paused: its messages wait while the rest of the queue flows.
    pub paused: bool,
    /// At most this many of its messages in flight: its own limit, else the queue's; None:
    /// no limit.
    pub concurrency: Option<u32>,
    /// Its own limit, if it has one (in place of the queue's).
    pub own_concurrency: Option<u32>,
    /// Messages it gives per turn of the rotation.
    pub weight: u32,
    /// At most this many of its messages delivered a second: its own limit, else the
    /// queue's ([`Setting::GroupRateLimit`](crate::Setting::GroupRateLimit)); None: no limit.
    pub rate_limit: Option<RateLimit>,
    /// Its own rate limit, if it has one (in place of the queue's).
    pub own_rate_limit: Option<RateLimit>,
}

/// Changes to one group's settings; `None` leaves one as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupSettings {
    /// `Some(Some(n))`: at most n of the group's messages in flight (1 to
    /// [`MAX_GROUP_CONCURRENCY`]), in place of the queue's group concurrency;
    /// `Some(None)`: the queue's again.
    pub concurrency: Option<Option<u32>>,
    /// `Some(Some(w))`: the group gives w messages per turn of the rotation (1 to
    /// [`MAX_GROUP_WEIGHT`]); `Some(None)`: 1 again.
    pub weight: Option<Option<u32>>,
    /// `Some(true)`: pause the group (claims skip it; the rest of the queue flows);
    /// `Some(false)`: resume it.
    pub paused: Option<bool>,
    /// `Some(Some(limit))`: at most `limit.per_second` of the group's messages delivered a
    /// second, bursts of `limit.burst`, in place of the queue's group rate limit;
    /// `Some(None)`: the queue's again.
    pub rate_limit: Option<Option<RateLimit>>,
}

/// The groups of one queue.
pub struct Groups<'a> {
    queue: &'a QueueCore,
}

impl<'a> Groups<'a> {
    pub(crate) fn new(queue: &'a QueueCore) -> Self {
        Groups { queue }
    }

    /// One page of the queue's groups, most messages first: `limit` (1 to 1000) from
    /// `offset` (at most [`MAX_GROUP_OFFSET`]). On a queue of several partitions each is read
    /// from its first group to `offset + limit`, and the pages merged.
    pub async fn list(&self, offset: u64, limit: usize) -> Result<GroupPage> {
        check_count("a page", limit)?;
        if offset > MAX_GROUP_OFFSET {
            return Err(InvalidInput::Option(format!(
                "a page of groups starts at most {MAX_GROUP_OFFSET} deep"
            ))
            .into());
        }
        let layout = self.queue.known_layout().await?;
        let (skip, want) = if layout.count() == 1 {
            (offset, limit as u64)
        } else {
            (0, offset + limit as u64)
        };
        let reads = layout.parts().iter().map(|keys| async move {
            let mut inv = invocation(keys, &SCRIPTS.group_list);
            inv.arg(skip).arg(want);
            let mut r = Reply::new(self.queue.invoke(&inv).await?)?;
            let total = r.uint()?;
            let mut groups = Vec::new();
            while r.remaining() > 0 {
                let name = r.string()?;
                groups.push(GroupSummary {
                    name,
                    messages: r.uint()?,
                });
            }
            Ok::<_, Error>((total, groups))
        });
        let mut page = GroupPage {
            total: 0,
            groups: Vec::new(),
        };
        for part in join_all(reads).await {
            let (total, groups) = part?;
            page.total += total;
            page.groups.extend(groups);
        }
        if layout.count() > 1 {
            page.groups
                .sort_by(|a, b| b.messages.cmp(&a.messages).then(a.name.cmp(&b.name)));
            page.groups = page
                .groups
                .into_iter()
                .skip(offset as usize)
                .take(limit)
                .collect();
        }
        Ok(page)
    }

    /// What group `name` holds, and its settings (a group with no messages holds nothing).
    pub async fn get(&self, name: &str) -> Result<GroupInfo> {
        check_group(name)?;
        let layout = self.queue.known_layout().await?;
        let mut inv = invocation(layout.part(partition(&layout, name)), &SCRIPTS.group_info);
        inv.arg(name);
        let mut r = Reply::new(self.queue.invoke(&inv).await?)?;
        let (messages, ready, slots) = (r.uint()?, r.uint()?, r.uint()?);
        let (keepers_waiting, keepers_ready) = (r.uint()?, r.uint()?);
        let own = Own::parse(&r.string()?);
        let queue_limit = Some(r.uint()? as u32).filter(|n| *n > 0);
        let queue_rate = parse_limit(&r.string()?);
        let in_flight = slots.saturating_sub(keepers_waiting + keepers_ready);
        Ok(GroupInfo {
            name: name.to_owned(),
            delayed: messages.saturating_sub(ready + in_flight),
            ready,
            in_flight,
            paused: own.paused,
            concurrency: own.concurrency.or(queue_limit),
            own_concurrency: own.concurrency,
            weight: own.weight.unwrap_or(1),
            rate_limit: own.rate_limit.or(queue_rate),
            own_rate_limit: own.rate_limit,
        })
    }

    /// Changes group `name`'s own settings, all of them or, if one is refused, none.
    /// Resuming a group, or raising its limit, lets it back into the rotation at once.
    pub async fn configure(&self, name: &str, settings: GroupSettings) -> Result<GroupInfo> {
        check_group(name)?;
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(limit) = settings.concurrency {
            pairs.push((
                "l",
                checked("a group concurrency", limit, MAX_GROUP_CONCURRENCY)?,
            ));
        }
        if let Some(weight) = settings.weight {
            pairs.push(("w", checked("a group weight", weight, MAX_GROUP_WEIGHT)?));
        }
        if let Some(paused) = settings.paused {
            pairs.push(("p", if paused { "1" } else { "" }.to_owned()));
        }
        match settings.rate_limit {
            Some(Some(limit)) => {
                check_rate_limit(limit)?;
                pairs.push(("r", limit.per_second.to_string()));
                pairs.push(("b", limit.burst.to_string()));
            }
            Some(None) => {
                pairs.push(("r", String::new()));
                pairs.push(("b", String::new()));
            }
            None => {}
        }
        let layout = self.queue.known_layout().await?;
        let mut inv = invocation(
            layout.part(partition(&layout, name)),
            &SCRIPTS.group_control,
        );
        inv.arg(name);
        for (setting, value) in &pairs {
            inv.arg(*setting).arg(value);
        }
        self.queue.invoke(&inv).await?;
        self.get(name).await
    }

    /// Pauses group `name`: claims skip it while the rest of the queue flows; its messages
    /// in flight settle as usual.
    pub async fn pause(&self, name: &str) -> Result<GroupInfo> {
        let settings = GroupSettings {
            paused: Some(true),
            ..GroupSettings::default()
        };
        self.configure(name, settings).await
    }

    /// Resumes group `name`.
    pub async fn resume(&self, name: &str) -> Result<GroupInfo> {
        let settings = GroupSettings {
            paused: Some(false),
            ..GroupSettings::default()
        };
        self.configure(name, settings).await
    }
}

/// The partition group `name` lives in (as `send.rs` puts its messages).
fn partition(layout: &Layout, name: &str) -> usize {
    layout.for_caller_id(name)
}

/// A setting's value for `group_control.lua`: '' to clear it, else 1 to `max`.
fn checked(what: &str, value: Option<u32>, max: u32) -> Result<String> {
    match value {
        None => Ok(String::new()),
        Some(n) if (1..=max).contains(&n) => Ok(n.to_string()),
        Some(n) => Err(InvalidInput::Option(format!("{what} is 1 to {max}, not {n}")).into()),
    }
}

/// A group's own settings as `gconf` keeps them: 'l=<limit>,w=<weight>,p=1,r=<rate>,b=<burst>'.
#[derive(Default)]
struct Own {
    concurrency: Option<u32>,
    weight: Option<u32>,
    paused: bool,
    rate_limit: Option<RateLimit>,
}

impl Own {
    fn parse(text: &str) -> Own {
        let mut own = Own::default();
        let (mut rate, mut burst) = (None, None);
        for pair in text.split(',') {
            match pair.split_once('=') {
                Some(("l", n)) => own.concurrency = n.parse().ok(),
                Some(("w", n)) => own.weight = n.parse().ok(),
                Some(("p", "1")) => own.paused = true,
                Some(("r", n)) => rate = n.parse().ok(),
                Some(("b", n)) => burst = n.parse().ok(),
                _ => {}
            }
        }
        own.rate_limit = rate.map(|per_second| RateLimit {
            per_second,
            burst: burst.unwrap_or(1),
        });
        own
    }
}
