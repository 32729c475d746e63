//! `delayq health`: asks a running server's `/readyz` and exits 0 when it is ready, 1 when
//! not (its answer on stderr). It is the container image's `HEALTHCHECK`, so the image needs
//! no curl: with no flags it asks the server of this machine (`DELAYQ_LISTEN`, a wildcard
//! address asked on loopback), with a token of the server's own tokens file
//! (`DELAYQ_TOKENS_FILE`; a monitor's first, of the entries that give a secret in clear) when
//! it has one.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};

use super::token_reload::TokenSource;

/// How long the whole check may take.
const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(clap::Args)]
pub struct HealthArgs {
    /// The server's URL (default: the address of DELAYQ_LISTEN on this machine).
    #[arg(long, env = "DELAYQ_URL")]
    url: Option<String>,
    /// The bearer token (default: one from the tokens file, a monitor's first).
    #[arg(long, env = "DELAYQ_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The address the server listens on, when --url is not given.
    #[arg(long, env = "DELAYQ_LISTEN", default_value = "127.0.0.1:7400")]
    listen: SocketAddr,
    /// The server's tokens file, to take a token from when --token is not given.
    #[arg(long, env = "DELAYQ_TOKENS_FILE")]
    tokens_file: Option<PathBuf>,
}

pub async fn run(args: HealthArgs) -> anyhow::Result<()> {
    let base = match &args.url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => format!("http://{}", asked_address(args.listen)),
    };
    let token = match (&args.token, &args.tokens_file) {
        (Some(token), _) => Some(token.clone()),
        (None, Some(file)) => token_from(file)?,
        (None, None) => None,
    };
    // reqwest's rustls needs a crypto provider (an https --url); ring is the workspace's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(TIMEOUT)
        // The server of this machine: never through an HTTP_PROXY of the environment.
        .no_proxy()
        .build()
        .context("an HTTP client")?;
    let mut request = http.get(format!("{base}/readyz"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = request
        .send()
        .await
        .with_context(|| format!("no answer from {base}"))?;
    let status = answer.status();
    let body = answer.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("{base}/readyz answered {status}: {}", body.trim());
    }
    println!("{}", body.trim());
    Ok(())
}

/// Where to ask a server that listens on `listen`: a wildcard address on loopback.
fn asked_address(listen: SocketAddr) -> SocketAddr {
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, listen.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, listen.port()).into(),
        _ => listen,
    }
}

/// A token of the tokens file: a monitor's if it has one (it reads /readyz and no more).
/// Only an entry that gives its secret in clear has one to present: with hashed entries
/// only, the check needs DELAYQ_TOKEN.
fn token_from(file: &Path) -> anyhow::Result<Option<String>> {
    let source = TokenSource {
        file: Some(file.to_owned()),
        inline: None,
    };
    let tokens = source.load()?;
    Ok(tokens.probe_secret().map(str::to_owned))
}
