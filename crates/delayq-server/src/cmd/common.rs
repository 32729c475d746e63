//! What the admin commands share: their common flags and where their requests go
//! (`api_client.rs`), how they print (a table, or the API's JSON answer with `--json`), and
//! the text forms of times, payloads and backoffs.

use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{bail, Context};
use delayq::DelayQ;
use serde_json::{json, Value};

use super::api_client::ApiClient;
use super::keys_file::KeysFile;
use super::redis_args::RedisArgs;

/// Flags every admin command takes.
#[derive(clap::Args)]
pub struct Common {
    #[command(flatten)]
    redis: RedisArgs,
    #[command(flatten)]
    keys: KeysFile,
    /// Ask the delayq server at this URL (e.g. https://delayq.internal:7400) over HTTP,
    /// with --token: no access to Redis or the data dir needed. Without it, the command
    /// runs in this process against Redis.
    // Its own id: `url` is a positional argument of `push set` and `webhooks add`.
    #[arg(long = "url", id = "server_url", env = "DELAYQ_URL", global = true)]
    server_url: Option<String>,
    /// The bearer token for --url (an admin's for most commands).
    #[arg(long, env = "DELAYQ_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// Print the API's JSON answer instead of a table.
    #[arg(long)]
    json: bool,
}

impl Common {
    /// Whether to print JSON.
    pub(super) fn json(&self) -> bool {
        self.json
    }

    /// Where this command's requests go: the server of --url, or this process on Redis.
    pub(super) async fn api(&self) -> anyhow::Result<ApiClient> {
        match &self.server_url {
            Some(url) => ApiClient::http(url, self.token.clone()),
            None => ApiClient::in_process(self.connect().await?),
        }
    }

    pub(super) async fn connect(&self) -> anyhow::Result<DelayQ> {
        let dq = self.open().await?;
        CONNECTED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(dq.clone());
        Ok(dq)
    }

    async fn open(&self) -> anyhow::Result<DelayQ> {
        let keys = self.keys.load()?;
        let config = || {
            let config = delayq::Config::default().process_role("cli");
            match &keys {
                Some(keys) => config.keys(keys.clone()),
                None => config,
            }
        };
        if let Some(cluster) = self.redis.connect_cluster(config()).await {
            return cluster;
        }
        let url = match &self.redis.redis_url {
            Some(url) => url.clone(),
            None => {
                let socket = self.redis.data_dir.join("redis.sock");
                if !socket.exists() {
                    bail!(
                        "no --redis-url given and no embedded Redis running in {} (start `delayq serve` there, or pass --redis-url)",
                        self.redis.data_dir.display()
                    );
                }
                let socket = std::fs::canonicalize(&socket)
                    .with_context(|| format!("cannot resolve {}", socket.display()))?;
                format!("redis+unix://{}", socket.display())
            }
        };
        DelayQ::connect_with(&url, config())
            .await
            .context("cannot connect to Redis")
    }
}

/// The clients this run connected: their announcements in `dq:processes` are taken back
/// when it ends ([`withdraw_all`]), so a command that ended is not listed as a process.
static CONNECTED: Mutex<Vec<DelayQ>> = Mutex::new(Vec::new());

/// Takes back the announcements of every client this run connected (best effort: one not
/// taken back ends with its lease).
pub(super) async fn withdraw_all() {
    let clients = std::mem::take(&mut *CONNECTED.lock().unwrap_or_else(|p| p.into_inner()));
    for dq in clients {
        if let Err(e) = dq.withdraw().await {
            tracing::debug!(error = %e, "announcement not taken back; it ends with its lease");
        }
    }
}

pub(super) fn print(
    common: &Common,
    json: &Value,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if common.json {
        println!("{json}");
    } else {
        println!("{}", table());
    }
    Ok(())
}

/// A message's payload as text, from the API's answer: JSON (`payload`) as it is, bytes
/// (`payload_base64`) as UTF-8 where they are, else `base64:...`; `-` for none.
pub(super) fn payload_text(message: &Value) -> String {
    use base64::Engine;
    if let Some(json) = message.get("payload") {
        return json.to_string();
    }
    let Some(encoded) = message["payload_base64"].as_str() else {
        return "-".into();
    };
    match base64::engine::general_purpose::STANDARD.decode(encoded) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) if !text.chars().any(char::is_control) => text,
            _ => format!("base64:{encoded}"),
        },
        Err(_) => format!("base64:{encoded}"),
    }
}

/// A payload given on the command line, as the API takes it: `payload` for JSON (checked
/// here), else the text's bytes as `payload_base64`.
pub(super) fn payload_field(body: &mut Value, payload: &str, json: bool) -> anyhow::Result<()> {
    use base64::Engine;
    if json {
        let value: Value = serde_json::from_str(payload).context("--json-payload: not JSON")?;
        body["payload"] = value;
    } else {
        body["payload_base64"] = json!(base64::engine::general_purpose::STANDARD.encode(payload));
    }
    Ok(())
}

/// A duration as the API takes it: whole milliseconds.
pub(super) fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// A time as the API takes it: ms since the Unix epoch (0 for a time before it).
pub(super) fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, ms)
}

/// A JSON string's text (`-` for anything else).
pub(super) fn text(value: &Value) -> String {
    value.as_str().unwrap_or("-").to_owned()
}

/// The text of a time in an answer (`null`: `-`).
pub(super) fn time_of(value: &Value) -> String {
    value.as_u64().map_or("-".into(), time_text)
}

pub(super) fn time_text(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// `--backoff` (`fixed:30s`, `exponential:1s..10m`, `linear:30s..10m` or
/// `list:30s,2m,10m`) and `--jitter` as the API's retry policy; the durations stay text,
/// which the API reads.
pub(super) fn backoff_json(spec: &str, jitter: Option<u8>) -> anyhow::Result<Value> {
    let range = |text: &str| -> anyhow::Result<(String, String)> {
        let (base, cap) = text
            .split_once("..")
            .with_context(|| format!("--backoff {text:?}: give BASE..CAP, e.g. 1s..10m"))?;
        Ok((base.trim().to_owned(), cap.trim().to_owned()))
    };
    let mut policy = match spec.split_once(':') {
        Some(("fixed", delay)) => json!({ "fixed": { "delay": delay.trim() } }),
        Some(("exponential", r)) => {
            let (base, cap) = range(r)?;
            json!({ "exponential": { "base": base, "cap": cap } })
        }
        Some(("linear", r)) => {
            let (base, cap) = range(r)?;
            json!({ "linear": { "base": base, "cap": cap } })
        }
        Some(("list", delays)) => {
            let delays: Vec<&str> = delays.split(',').map(str::trim).collect();
            json!({ "list": { "delays": delays } })
        }
        _ => bail!(
            "--backoff {spec:?}: give fixed:30s, exponential:1s..10m, linear:30s..10m or list:30s,2m,10m"
        ),
    };
    if let (Some(jitter), Some(inner)) = (jitter, policy.as_object_mut()) {
        for variant in inner.values_mut() {
            variant["jitter_percent"] = json!(jitter);
        }
    }
    Ok(policy)
}
