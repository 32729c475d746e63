//! Hash slots: which slot a key is in (CRC16, as Redis Cluster computes it), what
//! `CLUSTER SLOTS` says serves each, and whether every slot is served.

use crate::resp::Reply;

/// Number of hash slots in a Redis Cluster.
pub(super) const SLOTS: u32 = 16384;

/// One entry of `CLUSTER SLOTS`: slots `start..=end` served by the master
/// on `127.0.0.1:master_port`, with replicas on `replica_ports` (sorted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SlotRange {
    pub(super) start: u16,
    pub(super) end: u16,
    pub(super) master_port: u16,
    pub(super) replica_ports: Vec<u16>,
}

/// Parses `CLUSTER SLOTS`: an array of `[start, end, [ip, port, id, ..],
/// replicas..]`. `None` if the reply has another shape.
pub(super) fn parse_cluster_slots(reply: &Reply) -> Option<Vec<SlotRange>> {
    let Reply::Array(Some(ranges)) = reply else {
        return None;
    };
    ranges
        .iter()
        .map(|range| {
            let Reply::Array(Some(fields)) = range else {
                return None;
            };
            let int = |r: Option<&Reply>| match r {
                Some(Reply::Int(n)) => u16::try_from(*n).ok(),
                _ => None,
            };
            // Each node is [ip, port, id, ..]; the master comes first.
            let port = |node: &Reply| match node {
                Reply::Array(Some(node)) => int(node.get(1)),
                _ => None,
            };
            let mut replica_ports = fields
                .get(3..)
                .unwrap_or_default()
                .iter()
                .map(port)
                .collect::<Option<Vec<u16>>>()?;
            replica_ports.sort_unstable();
            Some(SlotRange {
                start: int(fields.first())?,
                end: int(fields.get(1))?,
                master_port: port(fields.get(2)?)?,
                replica_ports,
            })
        })
        .collect()
}

/// Checks that sorted `map` covers every slot exactly once.
pub(super) fn check_coverage(map: &[SlotRange]) -> Result<(), String> {
    let mut next: u32 = 0;
    for range in map {
        if u32::from(range.start) != next || range.end < range.start {
            return Err(format!(
                "slot {next} is unassigned or assigned twice: {map:?}"
            ));
        }
        next = u32::from(range.end) + 1;
    }
    if next != SLOTS {
        return Err(format!("slots {next}-{} are unassigned", SLOTS - 1));
    }
    Ok(())
}

/// The value of `field:value` in the text of `INFO`/`CLUSTER INFO`.
pub(crate) fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// The hash slot of `key`, as Redis computes it (`CLUSTER KEYSLOT`): CRC16
/// (XMODEM) modulo 16384 of the key, or of its hash tag, the part between
/// the first `{` and the first `}` after it, if that is not empty. Keys with
/// the same hash tag share a slot: `{user1000}.following` and
/// `{user1000}.followers`.
pub fn key_slot(key: &str) -> u16 {
    let key = key.as_bytes();
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let tag = &key[open + 1..];
            let close = tag.iter().position(|&b| b == b'}')?;
            // "{}" is no hash tag: the whole key is hashed.
            Some(&tag[..close]).filter(|tag| !tag.is_empty())
        })
        .unwrap_or(key);
    crc16(hashed) & 0x3FFF
}

/// CRC16-CCITT as Redis uses it (XMODEM): polynomial 0x1021, initial value
/// 0, no reflection, no final xor.
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_xmodem() {
        // The standard check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn key_slot_matches_redis() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("bar"), 5061);
        assert_eq!(key_slot("hello"), 866);
        assert_eq!(key_slot(""), 0);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(
            key_slot("{user1000}.following"),
            key_slot("{user1000}.followers")
        );
    }

    #[test]
    fn key_slot_follows_hash_tag_rules() {
        // Only the first `{` and the first `}` after it count.
        assert_eq!(key_slot("foo{bar}{zap}"), key_slot("bar"));
        assert_eq!(key_slot("foo{{bar}}zap"), key_slot("{bar"));
        // An empty tag or an unclosed `{` means the whole key is hashed.
        assert_eq!(key_slot("foo{}{bar}"), crc16(b"foo{}{bar}") & 0x3FFF);
        assert_eq!(key_slot("foo{bar"), crc16(b"foo{bar") & 0x3FFF);
        assert_eq!(key_slot("}{"), crc16(b"}{") & 0x3FFF);
        assert_eq!(key_slot("{}"), crc16(b"{}") & 0x3FFF);
        assert_eq!(key_slot("{a}"), key_slot("a"));
    }

    #[test]
    fn parses_cluster_slots() {
        let node = |port: i64| {
            Reply::Array(Some(vec![
                Reply::Bulk(Some(b"127.0.0.1".to_vec())),
                Reply::Int(port),
                Reply::Bulk(Some(b"id".to_vec())),
                Reply::Array(Some(vec![])),
            ]))
        };
        let reply = Reply::Array(Some(vec![
            Reply::Array(Some(vec![
                Reply::Int(0),
                Reply::Int(5460),
                node(7000),
                node(7004),
                node(7003),
            ])),
            Reply::Array(Some(vec![Reply::Int(5461), Reply::Int(16383), node(7001)])),
        ]));
        let map = parse_cluster_slots(&reply).expect("well-formed");
        assert_eq!(
            map,
            [
                SlotRange {
                    start: 0,
                    end: 5460,
                    master_port: 7000,
                    replica_ports: vec![7003, 7004],
                },
                SlotRange {
                    start: 5461,
                    end: 16383,
                    master_port: 7001,
                    replica_ports: vec![],
                },
            ]
        );
        assert_eq!(check_coverage(&map), Ok(()));
        assert!(check_coverage(&map[..1]).is_err());
        assert!(check_coverage(&map[1..]).is_err());
        assert!(parse_cluster_slots(&Reply::Int(1)).is_none());
    }

    #[test]
    fn reads_info_fields() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_ok:16384\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_slots_ok"), Some("16384"));
        assert_eq!(info_field(info, "cluster_slots"), None);
    }
}
