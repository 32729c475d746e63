//! `delayq serve` as a user runs it: the real binary, started on an external Redis or its
//! own embedded one, stopped by SIGTERM or killed outright ([`Serve`]). The tests of what it
//! does so are in `serve_runs.rs`; other files start it the same way.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;

use crate::common::*;

/// A running `delayq serve`; killed on drop.
pub(crate) struct Serve {
    child: Child,
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

impl Serve {
    /// Starts `delayq serve ARGS --listen 127.0.0.1:<free port>` and waits for /healthz.
    /// `env` adds to (or overrides) the test's environment.
    pub(crate) async fn start(args: &[&str], env: &[(&str, &str)]) -> Serve {
        Self::start_binary(Path::new(env!("CARGO_BIN_EXE_delayq")), args, env).await
    }

    /// [`start`](Self::start) with another build of `delayq` (a release before this one).
    pub(crate) async fn start_binary(binary: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
        Self::launch(binary, args, env, &[]).await
    }

    /// [`start`](Self::start) without the variables `unset` (as `DELAYQ_REDIS_SERVER`).
    pub(crate) async fn start_unset(args: &[&str], env: &[(&str, &str)], unset: &[&str]) -> Serve {
        Self::launch(Path::new(env!("CARGO_BIN_EXE_delayq")), args, env, unset).await
    }

    /// [`start`](Self::start) with its log written to `log` (readable while it runs).
    pub(crate) async fn start_logged(args: &[&str], env: &[(&str, &str)], log: &Path) -> Serve {
        let file = std::fs::File::create(log).expect("the log file");
        Self::launch_with(
            Path::new(env!("CARGO_BIN_EXE_delayq")),
            args,
            env,
            &[],
            Stdio::from(file),
        )
        .await
    }

    async fn launch(binary: &Path, args: &[&str], env: &[(&str, &str)], unset: &[&str]) -> Serve {
        Self::launch_with(binary, args, env, unset, Stdio::piped()).await
    }

    async fn launch_with(
        binary: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        unset: &[&str],
        stderr: Stdio,
    ) -> Serve {
        let port = redis_fixture::free_port();
        let mut cmd = Command::new(binary);
        cmd.arg("serve")
            .args(args)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("DELAYQ_REDIS_URL")
            .stdout(Stdio::null())
            .stderr(stderr);
        cmd.envs(env.iter().copied());
        for name in unset {
            cmd.env_remove(name);
        }
        let child = cmd.spawn().expect("spawn delayq serve");
        let mut serve = Serve {
            child,
            base: format!("http://127.0.0.1:{port}"),
            http: http_client(),
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = serve.child.try_wait() {
                panic!("delayq serve exited with {status}: {}", serve.stderr());
            }
            let url = format!("{}/healthz", serve.base);
            if serve.http.get(&url).send().await.is_ok() {
                return serve;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "serve not up: {}",
                serve.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut text);
        }
        text
    }

    pub(crate) async fn post(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> (StatusCode, serde_json::Value) {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("request");
        read(resp).await
    }

    pub(crate) async fn get(&self, path: &str) -> (StatusCode, serde_json::Value) {
        read(self.get_response(path).await).await
    }

    pub(crate) async fn get_text(&self, path: &str) -> (StatusCode, String) {
        let resp = self.get_response(path).await;
        let status = resp.status();
        (status, resp.text().await.expect("body"))
    }

    async fn get_response(&self, path: &str) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request")
    }

    /// Sends it the signal `name` (`HUP`).
    pub(crate) fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name} {pid}");
    }

    /// SIGTERM, then waits for a clean exit; returns the log.
    pub(crate) fn terminate(mut self) -> String {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status = self.child.wait().expect("wait");
        let log = self.stderr();
        assert!(status.success(), "exit {status} after SIGTERM: {log}");
        log
    }

    /// SIGKILL, as a crash would.
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    /// SIGTERM first, so that `serve` stops its embedded Redis (a `serve` killed outright
    /// leaves it running until the next one on its directory); SIGKILL if it takes over 10 s.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let pid = self.child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
