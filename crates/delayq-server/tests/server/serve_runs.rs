//! `delayq serve` as a user runs it: it warns where messages could be lost, keeps them across
//! a crash of itself and its embedded Redis, refuses a second server on its data dir and a
//! public address without tokens, takes over or restarts its Redis, reaches a TLS Redis, and
//! reads its tokens from a file or the environment.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::common::*;
use crate::serve::Serve;

#[tokio::test]
async fn on_an_external_redis_it_warns_where_messages_could_be_lost() {
    let redis = RedisServer::start();
    let serve = Serve::start(&["--redis-url", &redis.url()], &[]).await;
    let (status, _) = serve
        .post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let log = serve.terminate();
    assert!(log.contains("appendonly"), "no AOF warning in: {log}");
}

/// A `serve` on an embedded Redis in a fresh data directory (fsync always), holding one
/// message `kept` in queue `q`.
async fn embedded_with_a_message(dir: &tempfile::TempDir) -> (Serve, std::path::PathBuf) {
    let data = dir.path().join("data");
    let data_arg = data.to_str().expect("utf-8 path");
    let serve = Serve::start(&["--data-dir", data_arg, "--fsync-always"], &[]).await;
    let sent = json!({ "payload": { "order": 1 }, "id": "kept" });
    assert_eq!(
        serve.post("/v1/queues/q/messages", sent).await.0,
        StatusCode::CREATED
    );
    (serve, data)
}

/// Receives from queue `q` and checks that it is message `kept`.
async fn assert_kept(serve: &Serve) {
    let (status, got) = serve
        .post("/v1/queues/q/receive", json!({ "max": 1 }))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["deliveries"][0]["id"], "kept", "{got}");
    assert_eq!(got["deliveries"][0]["payload"], json!({ "order": 1 }));
}

#[tokio::test]
async fn embedded_messages_survive_a_crash_of_the_server_and_its_redis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serve, data) = embedded_with_a_message(&dir).await;
    serve.kill();
    kill_redis_of(&data);
    let serve = Serve::start(&["--data-dir", data.to_str().expect("utf-8")], &[]).await;
    assert_kept(&serve).await;
    serve.terminate();
}

/// Kills the embedded redis-server of `data` with SIGKILL, as a crash of the machine's
/// process tree would.
fn kill_redis_of(data: &Path) {
    if let Ok(pid) = std::fs::read_to_string(data.join("redis.pid")) {
        let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
    }
}

#[tokio::test]
async fn a_second_serve_on_the_same_data_dir_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data_arg = data.to_str().expect("utf-8 path");
    let first = Serve::start(&["--data-dir", data_arg], &[]).await;
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["serve", "--data-dir", data_arg, "--listen", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another") || err.contains("already"), "{err}");
    let (status, _) = first
        .post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "the first one is untouched");
    first.terminate();
}

#[test]
fn without_a_server_binary_on_the_path_it_says_how_to_get_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("PATH", dir.path())
        .env_remove("DELAYQ_REDIS_URL")
        .env_remove("DELAYQ_REDIS_SERVER")
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for named in [
        "redis-server",
        "valkey-server",
        "apt-get install",
        "--redis-url",
    ] {
        assert!(err.contains(named), "{named} missing from: {err}");
    }
}

#[test]
fn a_public_address_without_tokens_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--redis-url",
            "redis://127.0.0.1:1/",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to listen"), "{err}");
}

#[tokio::test]
async fn a_redis_left_running_by_a_killed_serve_is_taken_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serve, data) = embedded_with_a_message(&dir).await;
    let data_arg = data.to_str().expect("utf-8 path");
    let orphan = std::fs::read_to_string(data.join("redis.pid")).expect("pidfile");
    serve.kill();
    assert!(
        Path::new(&format!("/proc/{}", orphan.trim())).exists(),
        "its redis-server outlives a killed serve"
    );

    let serve = Serve::start(&["--data-dir", data_arg], &[]).await;
    let now = std::fs::read_to_string(data.join("redis.pid")).expect("pidfile");
    assert_ne!(now.trim(), orphan.trim(), "a redis-server of its own");
    assert_kept(&serve).await;
    serve.terminate();
    wait_until(Duration::from_secs(10), "the orphan to be gone", || async {
        !Path::new(&format!("/proc/{}/cmdline", orphan.trim())).exists()
            || std::fs::read(format!("/proc/{}/cmdline", orphan.trim())).is_ok_and(|c| c.is_empty())
    })
    .await;
}

#[tokio::test]
async fn a_crashed_embedded_redis_is_started_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (serve, data) = embedded_with_a_message(&dir).await;
    kill_redis_of(&data);
    wait_until(
        Duration::from_secs(20),
        "the server to be ready again",
        || async {
            let url = format!("{}/readyz", serve.base);
            matches!(serve.http.get(&url).send().await, Ok(r) if r.status() == StatusCode::OK)
        },
    )
    .await;
    assert_kept(&serve).await;
    serve.terminate();
}

/// A TLS-only redis-server with a certificate from a CA made for the test; killed on drop.
struct TlsRedis {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl TlsRedis {
    /// Starts a TLS-only server; `Err` with its log when it exits instead (a build without
    /// TLS says "Failed finding TLS support").
    fn start() -> Result<TlsRedis, String> {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(d)
                .output()
                .expect("openssl must be installed (.ci/run installs it)");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "1",
            "-subj",
            "/CN=delayq test CA",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ]);
        std::fs::write(
            d.join("san.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .expect("write");
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "1",
            "-extfile",
            "san.ext",
        ]);
        let port = redis_fixture::free_port();
        let child = Command::new(redis_fixture::redis_server_binary())
            .args([
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args([
                "--tls-cert-file",
                "server.crt",
                "--tls-key-file",
                "server.key",
            ])
            .args(["--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no"])
            .args(["--save", "", "--appendonly", "no", "--logfile", "redis.log"])
            .current_dir(d)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut redis = TlsRedis { child, port, dir };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = redis.child.try_wait() {
                let log =
                    std::fs::read_to_string(redis.dir.path().join("redis.log")).unwrap_or_default();
                return Err(format!("the server exited ({status}): {log}"));
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(redis);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the TLS server neither listened nor exited in time"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ca(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.crt")
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn rediss_urls_reach_a_tls_redis() {
    let redis = match TlsRedis::start() {
        Ok(redis) => redis,
        // Valkey's and Redis's own release builds leave TLS out unless built with it.
        Err(log) if log.contains("TLS support") => {
            return redis_fixture::cannot_run(
                "rediss_urls_reach_a_tls_redis",
                &format!(
                    "{} was built without TLS",
                    redis_fixture::redis_server_binary().display()
                ),
            );
        }
        Err(log) => panic!("the TLS server did not start: {log}"),
    };
    let url = format!("rediss://127.0.0.1:{}/", redis.port);
    let port = redis_fixture::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "serve",
            "--redis-url",
            &url,
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        // Trust the test's CA, as a user with a private CA would.
        .env("SSL_CERT_FILE", redis.ca())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn delayq serve");
    let http = http_client();
    let base = format!("http://127.0.0.1:{port}");
    let ready = async {
        loop {
            if let Ok(r) = http.get(format!("{base}/readyz")).send().await {
                if r.status() == StatusCode::OK {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(30), ready)
        .await
        .is_err()
    {
        let _ = child.kill();
        let mut log = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut log);
        }
        panic!("delayq serve never reached the TLS Redis: {log}");
    }
    let post =
        |path: &str, body: serde_json::Value| http.post(format!("{base}{path}")).json(&body).send();
    let sent = post("/v1/queues/tls/messages", json!({ "payload": "over tls" }))
        .await
        .expect("send");
    assert_eq!(sent.status(), StatusCode::CREATED);
    let got = post("/v1/queues/tls/receive", json!({ "wait": "5s" }))
        .await
        .expect("receive");
    let (status, body) = read(got).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["deliveries"][0]["payload"], "over tls", "{body}");
    let _ = child.kill();
    let _ = child.wait();

    // Without trusting the test's CA, the certificate is rejected: no silent plain text,
    // no unverified TLS.
    let refused = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["serve", "--redis-url", &url, "--listen", "127.0.0.1:0"])
        .env("SSL_CERT_FILE", "/nonexistent")
        .env("SSL_CERT_DIR", "/nonexistent")
        .output()
        .expect("run delayq serve");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("cannot connect to Redis"), "{err}");
}

#[tokio::test]
async fn tokens_come_from_a_file_or_the_environment() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tokens");
    std::fs::write(&file, "# on call\nadmin:file-token-0123456789\n").expect("write");
    let file_arg = file.to_str().expect("utf-8");
    let serve = Serve::start(
        &["--redis-url", &redis.url(), "--tokens-file", file_arg],
        &[],
    )
    .await;
    let get = |token: Option<&'static str>| {
        let mut req = serve.http.get(format!("{}/v1/queues", serve.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    assert_eq!(
        get(None).await.expect("get").status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(Some("file-token-0123456789"))
            .await
            .expect("get")
            .status(),
        StatusCode::OK
    );
    let log = serve.terminate();
    assert!(
        !log.contains("file-token-0123456789"),
        "a token was logged: {log}"
    );

    let port = redis_fixture::free_port();
    let mut env_serve = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "serve",
            "--redis-url",
            &redis.url(),
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .env("DELAYQ_TOKENS", "send:env-token-0123456789")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let http = http_client();
    let url = format!("http://127.0.0.1:{port}/v1/queues/q/messages");
    let mut status = None;
    for _ in 0..500 {
        let sent = http
            .post(&url)
            .bearer_auth("env-token-0123456789")
            .json(&json!({ "payload": 1 }))
            .send()
            .await;
        if let Ok(resp) = sent {
            status = Some(resp.status());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = env_serve.kill();
    let _ = env_serve.wait();
    assert_eq!(status, Some(StatusCode::CREATED));
}
