//! The HTTP clients pushes and failure callbacks go through: pooled per host, with the
//! address policy in their resolver (`address.rs`); one follows redirects (each hop checked),
//! one does not. Proxies from the environment are never used: a proxy would resolve the
//! host itself, past the address checks.

use std::sync::Arc;

use super::address::{literal_ip, AddressPolicy, GuardedResolver};
use super::target::PushTarget;

/// The HTTP clients pushes go through: pooled per host, with the address policy in their
/// resolver; one follows redirects (each hop checked), one does not.
#[derive(Clone)]
pub struct Clients {
    plain: reqwest::Client,
    redirecting: reqwest::Client,
    policy: Arc<AddressPolicy>,
}

impl Clients {
    /// Clients for `policy`.
    pub fn new(policy: AddressPolicy) -> Result<Self, String> {
        // reqwest's rustls needs a crypto provider; ring is the one the workspace builds.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let policy = Arc::new(policy);
        let build = |redirect: reqwest::redirect::Policy| {
            reqwest::Client::builder()
                .dns_resolver(Arc::new(GuardedResolver {
                    policy: policy.clone(),
                }))
                .redirect(redirect)
                // A proxy would resolve the target's host itself, past the address checks.
                .no_proxy()
                .user_agent(concat!("delayq/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| format!("push client: {e}"))
        };
        let hop_policy = policy.clone();
        let follow = reqwest::redirect::Policy::custom(move |attempt| {
            let refused = attempt
                .url()
                .host_str()
                .and_then(literal_ip)
                .and_then(|ip| hop_policy.refusal(ip));
            if let Some(why) = refused {
                attempt.error(format!("redirect to {why}"))
            } else if attempt.previous().len() >= 5 {
                attempt.error("more than 5 redirects")
            } else {
                attempt.follow()
            }
        });
        Ok(Clients {
            plain: build(reqwest::redirect::Policy::none())?,
            redirecting: build(follow)?,
            policy,
        })
    }

    /// The address policy.
    pub fn policy(&self) -> &Arc<AddressPolicy> {
        &self.policy
    }

    /// The client that follows no redirect (webhooks use it).
    pub fn plain(&self) -> reqwest::Client {
        self.plain.clone()
    }

    /// The client for `target`'s requests: redirects followed or not, as it says.
    pub fn for_target(&self, target: &PushTarget) -> reqwest::Client {
        if target.follow_redirects {
            self.redirecting.clone()
        } else {
            self.plain.clone()
        }
    }
}
