//! Where pushes may go: by default not to loopback, private, link-local (the cloud metadata
//! service at 169.254.169.254 among them), shared, multicast, reserved or other special
//! addresses (one table, [`SPECIAL`]), nor to IPv6 ranges that embed an IPv4 address (NAT64,
//! 6to4, Teredo), so that whoever may set a push target or send a message with its own URL
//! cannot make the server call into its own network (SSRF). An allowlist of networks
//! (`--push-allow 10.1.0.0/16`) admits some.
//!
//! The check runs where the address is known: when a target is set (a clear error), and on
//! every connection, through the HTTP client's resolver ([`GuardedResolver`]), so a name that
//! resolves differently later (DNS rebinding) is refused then too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// A network: an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl std::str::FromStr for Network {
    type Err = String;

    /// `10.0.0.0/8`, `::1/128`, or a bare address (the whole prefix).
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a network such as 10.0.0.0/8 or ::1/128");
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(bad)?,
            None => max,
        };
        Ok(Network { addr, prefix })
    }
}

impl Network {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(
                u128::from(u32::from(net)) << 96,
                u128::from(u32::from(ip)) << 96,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(u128::from(net), u128::from(ip), self.prefix)
            }
            _ => false,
        }
    }
}

fn prefix_eq(a: u128, b: u128, prefix: u8) -> bool {
    prefix == 0 || (a ^ b) >> (128 - u32::from(prefix)) == 0
}

/// The networks pushes may not reach unless the server allows them, each with why (the
/// class a refusal names): the IANA special-purpose registries for IPv4 and IPv6, without
/// the few entries meant to be reached globally, plus multicast, and the IPv6 ranges that
/// embed an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible and -translated), through
/// which a private IPv4 address could be reached past the IPv4 rows. An IPv4 address written
/// as IPv6 (`::ffff:10.0.0.1`) is judged as the IPv4 one. The first match names the class.
const SPECIAL: [(Network, &str); 32] = [
    (v4(0, 0, 0, 0, 8), "a \"this network\" address"),
    (v4(10, 0, 0, 0, 8), "a private address"),
    (
        v4(100, 64, 0, 0, 10),
        "a shared (carrier-grade NAT) address",
    ),
    (v4(127, 0, 0, 0, 8), "a loopback address"),
    (
        v4(169, 254, 0, 0, 16),
        "a link-local address (such as the cloud metadata service)",
    ),
    (v4(172, 16, 0, 0, 12), "a private address"),
    (v4(192, 0, 0, 0, 24), "an IETF protocol address"),
    (v4(192, 0, 2, 0, 24), "a documentation address"),
    (v4(192, 88, 99, 0, 24), "a 6to4 relay address"),
    (v4(192, 168, 0, 0, 16), "a private address"),
    (v4(198, 18, 0, 0, 15), "a benchmarking address"),
    (v4(198, 51, 100, 0, 24), "a documentation address"),
    (v4(203, 0, 113, 0, 24), "a documentation address"),
    (v4(224, 0, 0, 0, 4), "a multicast address"),
    (v4(240, 0, 0, 0, 4), "a reserved address"),
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "an unspecified address"),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "a loopback address"),
    (
        v6([0, 0, 0, 0, 0, 0, 0, 0], 96),
        "an IPv4-compatible address",
    ),
    (
        v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96),
        "an IPv4-translated address",
    ),
    (v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96), "a NAT64 address"),
    (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "a NAT64 address"),
    (
        v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64),
        "a discard-only address",
    ),
    (v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), "a Teredo address"),
    (
        v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        "an IETF protocol address",
    ),
    (
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        "a documentation address",
    ),
    (v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), "a 6to4 address"),
    (
        v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        "a documentation address",
    ),
    (
        v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),
        "a segment routing (SRv6) address",
    ),
    (
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        "a private (unique local) address",
    ),
    (
        v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        "a link-local address",
    ),
    (
        v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        "a site-local address",
    ),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "a multicast address"),
];

const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Network {
    Network {
        addr: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
        prefix,
    }
}

const fn v6(s: [u16; 8], prefix: u8) -> Network {
    Network {
        addr: IpAddr::V6(Ipv6Addr::new(
            s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
        )),
        prefix,
    }
}

/// Which addresses pushes may reach.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    allow: Vec<Network>,
}

impl AddressPolicy {
    /// Public addresses, and those in `allow`.
    pub fn new(allow: Vec<Network>) -> Self {
        AddressPolicy { allow }
    }

    /// Whether every address is allowed (`0.0.0.0/0` and `::/0`): nothing to resolve
    /// and check then.
    pub fn allows_everything(&self) -> bool {
        let everything = |v4: bool| {
            self.allow
                .iter()
                .any(|n| n.prefix == 0 && n.addr.is_ipv4() == v4)
        };
        everything(true) && everything(false)
    }

    /// Why `ip` may not be reached (its class), if it may not.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if self.allow.iter().any(|n| n.contains(ip)) {
            return None;
        }
        SPECIAL
            .iter()
            .find(|(network, _)| network.contains(ip))
            .map(|(_, class)| *class)
    }
}

/// Why a URL's host may not be pushed to. Two renderings: [`Refused::public`] for what
/// anyone who can send a message may read back (a message's error), which names the host
/// and the class of address but not what the name resolves to, so a send token cannot map
/// the internal network through it; [`Refused::detailed`] for an admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The URL has no host.
    NoHost,
    /// The host name does not resolve.
    Unresolved {
        /// As the URL names it.
        host: String,
    },
    /// The host is, or resolves to, an address pushes may not reach.
    Address {
        /// As the URL names it.
        host: String,
        /// The address refused.
        ip: IpAddr,
        /// Why ([`SPECIAL`]).
        class: &'static str,
    },
}

impl Refused {
    /// The host and why, without the address it resolves to.
    pub fn public(&self) -> String {
        match self {
            Refused::NoHost => "the URL has no host".into(),
            Refused::Unresolved { host } => format!("cannot resolve {host}"),
            Refused::Address { host, class, .. } => format!(
                "push to {host} refused: it is {class}, which the server does not reach \
                 unless it allows it (--push-allow)"
            ),
        }
    }

    /// Everything, the address included.
    pub fn detailed(&self) -> String {
        match self {
            Refused::Address { host, ip, class } => format!(
                "{host} resolves to {ip}, {class}: pushes there are refused unless the \
                 server allows it (--push-allow)"
            ),
            other => other.public(),
        }
    }
}

/// The HTTP client's resolver: the system's, with refused addresses taken out; a name with
/// nothing left fails to resolve, with the classes of what it resolved to (its error ends up
/// in a message's error history: no addresses there; the log has them).
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    /// Which addresses may be reached.
    pub policy: Arc<AddressPolicy>,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut classes: Vec<&str> = Vec::new();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| match policy.refusal(a.ip()) {
                    Some(class) => {
                        if !classes.contains(&class) {
                            classes.push(class);
                        }
                        false
                    }
                    None => true,
                })
                .collect();
            if allowed.is_empty() {
                if classes.is_empty() {
                    return Err(format!("push to {host} refused: no address").into());
                }
                tracing::warn!(%host, addresses = ?found, "push refused: every address of the host is refused");
                return Err(format!(
                    "push to {host} refused: it resolves to {}",
                    classes.join(", ")
                )
                .into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The address a URL host names literally (`10.0.0.1`, `[::1]`), if it is one: those are
/// connected to without a lookup, so the resolver never sees them.
pub fn literal_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Checks a URL's host now: an IP literal against the policy, a name by resolving it (every
/// address it resolves to must be allowed).
pub async fn check_url(policy: &AddressPolicy, url: &reqwest::Url) -> Result<(), Refused> {
    let host = url.host_str().ok_or(Refused::NoHost)?;
    if policy.allows_everything() {
        return Ok(());
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<IpAddr> = match literal_ip(host) {
        Some(ip) => vec![ip],
        None => tokio::net::lookup_host((host, port))
            .await
            .map_err(|_| Refused::Unresolved {
                host: host.to_owned(),
            })?
            .map(|a| a.ip())
            .collect(),
    };
    for ip in addrs {
        if let Some(class) = policy.refusal(ip) {
            return Err(Refused::Address {
                host: host.to_owned(),
                ip,
                class,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    /// Every special range, by its first and last address: each must be refused whole.
    const RANGES: [(&str, &str); 29] = [
        ("0.0.0.0", "0.255.255.255"),
        ("10.0.0.0", "10.255.255.255"),
        ("100.64.0.0", "100.127.255.255"),
        ("127.0.0.0", "127.255.255.255"),
        ("169.254.0.0", "169.254.255.255"),
        ("172.16.0.0", "172.31.255.255"),
        ("192.0.0.0", "192.0.0.255"),
        ("192.0.2.0", "192.0.2.255"),
        ("192.88.99.0", "192.88.99.255"),
        ("192.168.0.0", "192.168.255.255"),
        ("198.18.0.0", "198.19.255.255"),
        ("198.51.100.0", "198.51.100.255"),
        ("203.0.113.0", "203.0.113.255"),
        ("224.0.0.0", "239.255.255.255"),
        ("240.0.0.0", "255.255.255.255"),
        ("::", "::1"),
        ("::0.0.0.2", "::255.255.255.255"),
        ("64:ff9b::", "64:ff9b::ffff:ffff"),
        ("64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff"),
        ("100::", "100::ffff:ffff:ffff:ffff"),
        ("2001::", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("2002::", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("3fff::", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("5f00::", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("fec0::", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        ("ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ];

    #[test]
    fn every_special_range_is_refused_from_its_first_address_to_its_last() {
        let policy = AddressPolicy::default();
        for (first, last) in RANGES {
            for text in [first, last] {
                assert!(policy.refusal(ip(text)).is_some(), "{text} allowed");
                // An IPv4 address is judged the same written as IPv6 (::ffff:a.b.c.d).
                if let IpAddr::V4(v4) = ip(text) {
                    let mapped = IpAddr::V6(v4.to_ipv6_mapped());
                    assert!(policy.refusal(mapped).is_some(), "{mapped} allowed");
                }
            }
        }
        // Just outside the ranges, and public addresses, pass.
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.128.0.0",
            "100.63.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.0.3.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "::ffff:8.8.8.8",
            "2606:4700::1111",
            "2a00:1450:4001::1",
            "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff",
            "2001:200::",
            "2003::1",
        ] {
            assert_eq!(policy.refusal(ip(public)), None, "{public} refused");
        }
        // The allowlist opens a range on purpose, and only what it names.
        let nat64 = AddressPolicy::new(vec!["64:ff9b::/96".parse().expect("net")]);
        assert_eq!(nat64.refusal(ip("64:ff9b::a00:1")), None);
        assert!(nat64.refusal(ip("64:ff9b:1::1")).is_some());
    }

    #[test]
    fn private_and_special_addresses_are_refused_unless_allowed() {
        let policy = AddressPolicy::default();
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::",
        ] {
            assert!(policy.refusal(ip(refused)).is_some(), "{refused} allowed");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "172.32.0.1"] {
            assert_eq!(policy.refusal(ip(public)), None, "{public} refused");
        }
        let allowed = AddressPolicy::new(vec![
            "127.0.0.0/8".parse().expect("net"),
            "fd00::/8".parse().expect("net"),
        ]);
        assert_eq!(allowed.refusal(ip("127.0.0.2")), None);
        assert_eq!(allowed.refusal(ip("fd12::1")), None);
        assert!(allowed.refusal(ip("10.0.0.1")).is_some());
        assert!("10.0.0.0/33".parse::<Network>().is_err());
        assert!("nonsense".parse::<Network>().is_err());
    }
}
