//! Where pushes may go: by default not to loopback, private, link-local (the cloud metadata
//! service at 169.254.169.254 among them), shared, multicast or unspecified addresses, so that
//! whoever may set a push target cannot make the server call into its own network (SSRF). An
//! allowlist of networks (`--push-allow 10.1.0.0/16`) admits some.
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

    /// Why `ip` may not be reached, if it may not.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        // An IPv4 address written as IPv6 (::ffff:10.0.0.1) is judged as the IPv4 one.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        if self.allow.iter().any(|n| n.contains(ip)) {
            return None;
        }
        match ip {
            IpAddr::V4(v4) => refusal_v4(v4),
            IpAddr::V6(v6) => refusal_v6(v6),
        }
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address (such as the cloud metadata service)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || a == 0 || a >= 240 {
        Some("a reserved address")
    } else {
        None
    }
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("a loopback address")
    } else if first & 0xfe00 == 0xfc00 {
        Some("a private (unique local) address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("a reserved address")
    } else {
        None
    }
}

/// The HTTP client's resolver: the system's, with refused addresses taken out; a name with
/// nothing left fails to resolve, with the reason.
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
            let mut reasons = Vec::new();
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.refusal(a.ip()) {
                    Some(why) => {
                        reasons.push(format!("{} is {why}", a.ip()));
                        false
                    }
                    None => true,
                })
                .collect();
            if allowed.is_empty() {
                let why = if reasons.is_empty() {
                    "no address".to_owned()
                } else {
                    reasons.join(", ")
                };
                return Err(format!("push to {host} refused: {why}").into());
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

/// Checks a target URL's host now: an IP literal against the policy, a name by resolving it.
pub async fn check_url(policy: &AddressPolicy, url: &reqwest::Url) -> Result<(), String> {
    let host = url
        .host_str()
        .ok_or_else(|| "the URL has no host".to_owned())?;
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<IpAddr> = match literal_ip(host) {
        Some(ip) => vec![ip],
        None => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .map(|a| a.ip())
            .collect(),
    };
    for ip in addrs {
        if let Some(why) = policy.refusal(ip) {
            return Err(format!(
                "{host} resolves to {ip}, {why}: pushes there are refused unless the server \
                 allows it (--push-allow)"
            ));
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
