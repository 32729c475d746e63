//! A real browser for the dashboard's tests: chromedriver on a free loopback port, driving a
//! headless Chromium (Debian's `chromium` and `chromium-driver`, which `.ci/run` installs)
//! through fantoccini, with the few helpers those tests need. Every wait has a deadline, and
//! the browser's processes and files go with the [`Browser`], also when a test panics.

#![allow(dead_code)] // the dashboard's tests use the rest

use std::fmt::Display;
use std::fs::File;
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::cookies::Cookie;
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use rustix::process::{kill_process, Pid, Signal};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::time::{sleep, timeout, Instant};

use crate::common::*;

/// How long chromedriver may take to answer ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// The bound on any one WebDriver command (a page load is bounded by the session's
/// `pageLoad` timeout, below this).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
const POLL_INTERVAL: Duration = Duration::from_millis(50);
const INSTALL: &str = "install Debian's `chromium chromium-driver` as .ci/run does \
     (apt-get install -y chromium chromium-driver)";

/// A headless Chromium session with its own chromedriver. Prefer [`Browser::close`] at the
/// end of a test; dropping it (as a panicking test does) still kills every process.
pub(crate) struct Browser {
    client: Client,
    /// chromedriver's address, for the command fantoccini does not wrap (the browser log).
    driver_url: String,
    session: String,
    http: reqwest::Client,
    // Dropped in this order: the processes die before their files are removed.
    driver: Driver,
    dir: TempDir,
}

impl Browser {
    /// Starts chromedriver (env `CHROMEDRIVER`, else `/usr/bin/chromedriver`, else `PATH`)
    /// and a headless Chromium (env `CHROMIUM`, else `/usr/bin/chromium`), 1280×900.
    pub(crate) async fn start() -> Browser {
        let chromium = chromium_binary();
        let dir = tempfile::tempdir().expect("a temporary directory for the browser");
        let log = dir.path().join("chromedriver.log");
        let port = redis_fixture::free_port();
        let mut driver = Driver::spawn(port, dir.path());
        let driver_url = format!("http://127.0.0.1:{port}");
        // reqwest's TLS backend needs a crypto provider even for plain HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(COMMAND_TIMEOUT)
            .build()
            .expect("an HTTP client for chromedriver");
        wait_ready(&http, &driver_url, &mut driver, &log).await;

        let profile = dir.path().join("profile");
        let capabilities = json!({
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    // Chromium refuses its sandbox as root, which CI runs as.
                    "--no-sandbox",
                    "--disable-gpu",
                    // Containers often have a tiny /dev/shm; Chromium crashes when it fills.
                    "--disable-dev-shm-usage",
                    "--window-size=1280,900",
                    // A profile of our own, removed with the Browser.
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
            // So that console_errors can read the console.
            "goog:loggingPrefs": { "browser": "ALL" },
            // Bounds goto and execute on the browser's side.
            "timeouts": { "pageLoad": 20_000, "script": 10_000, "implicit": 0 },
        });
        let capabilities = capabilities
            .as_object()
            .cloned()
            .expect("capabilities are an object");
        let mut builder = ClientBuilder::new(HttpConnector::new());
        builder.capabilities(capabilities);
        let connect = builder.connect(&driver_url);
        let client = match timeout(COMMAND_TIMEOUT, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => panic!(
                "chromedriver did not start {chromium}: {e} ({INSTALL}); its log:\n{}",
                read_log(&log)
            ),
            Err(_) => panic!(
                "no browser session within {COMMAND_TIMEOUT:?}; chromedriver's log:\n{}",
                read_log(&log)
            ),
        };
        let session = bounded("read the session id", client.session_id())
            .await
            .expect("a session id");
        Browser {
            client,
            driver_url,
            session,
            http,
            driver,
            dir,
        }
    }

    /// Ends the session (Chromium quits), then chromedriver.
    pub(crate) async fn close(self) {
        bounded("close the session", self.client.clone().close()).await;
    }

    /// The client, for anything the helpers do not cover.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Navigates and waits for the page's load event.
    pub(crate) async fn goto(&self, url: &str) {
        bounded(format!("go to {url}"), self.client.goto(url)).await;
    }

    /// The element `css` selects; panics when there is none.
    pub(crate) async fn find(&self, css: &str) -> Element {
        bounded(format!("find `{css}`"), self.client.find(Locator::Css(css))).await
    }

    /// Every element `css` selects, perhaps none.
    pub(crate) async fn find_all(&self, css: &str) -> Vec<Element> {
        bounded(
            format!("find all `{css}`"),
            self.client.find_all(Locator::Css(css)),
        )
        .await
    }

    pub(crate) async fn click(&self, css: &str) {
        let element = self.find(css).await;
        bounded(format!("click `{css}`"), element.click()).await;
    }

    /// Replaces the value of the input `css` with `text`, typed as keys.
    pub(crate) async fn fill(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        bounded(format!("clear `{css}`"), element.clear()).await;
        bounded(format!("type into `{css}`"), element.send_keys(text)).await;
    }

    /// The rendered text of `css` (what a user sees, not `textContent`).
    pub(crate) async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        bounded(format!("read the text of `{css}`"), element.text()).await
    }

    /// Waits until `css` selects an element, and returns it.
    pub(crate) async fn wait_for(&self, css: &str, within: Duration) -> Element {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.attempt(self.client.find(Locator::Css(css))).await {
                Ok(element) => return element,
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                panic!("no `{css}` within {within:?}; last: {last}");
            }
            sleep(POLL_INTERVAL).await;
        }
    }

    /// Waits until the text of `css` contains `needle`, and returns that text. The element
    /// is looked up again each time, so a re-render in between does not matter.
    pub(crate) async fn wait_for_text(&self, css: &str, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let last = match self.attempt(self.client.find(Locator::Css(css))).await {
                Ok(element) => match self.attempt(element.text()).await {
                    Ok(text) if text.contains(needle) => return text,
                    Ok(text) => format!("text {text:?}"),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                panic!("`{css}` did not show {needle:?} within {within:?}; last: {last}");
            }
            sleep(POLL_INTERVAL).await;
        }
    }

    /// Resizes the window to `px` wide, keeping its height (e.g. 390 for a phone).
    pub(crate) async fn set_window_width(&self, px: u32) {
        let (_, height) = bounded("read the window size", self.client.get_window_size()).await;
        let height = u32::try_from(height).expect("a window height that fits u32");
        bounded(
            format!("set the window to {px}×{height}"),
            self.client.set_window_size(px, height),
        )
        .await;
    }

    /// Saves a PNG of the viewport to `<target>/ui-screenshots/<name>.png`, and returns its
    /// path; CI keeps the directory, so a failed run can be looked at.
    pub(crate) async fn screenshot(&self, name: &str) -> PathBuf {
        // A screenshot waits on the renderer, which a machine busy with the rest of the suite
        // (or a Chromium's first run, building its font cache) can starve past the bound:
        // three tries, and every failure is told if all of them fail.
        let mut failures = Vec::new();
        let png = loop {
            match self.attempt(self.client.screenshot()).await {
                Ok(png) => break png,
                Err(e) if failures.len() < 2 => failures.push(e),
                Err(e) => {
                    failures.push(e);
                    panic!("take screenshot {name}: {}", failures.join("; then: "))
                }
            }
        };
        let dir = target_dir().join("ui-screenshots");
        std::fs::create_dir_all(&dir).expect("create the screenshot directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write the screenshot");
        path
    }

    /// The console's errors (level SEVERE: `console.error`, uncaught exceptions, failed
    /// loads) since the previous call: chromedriver hands each log entry out once.
    pub(crate) async fn console_errors(&self) -> Vec<String> {
        // The legacy log endpoint, which chromedriver still serves in W3C mode and
        // fantoccini does not wrap.
        let url = format!("{}/session/{}/se/log", self.driver_url, self.session);
        let resp = self
            .http
            .post(&url)
            .json(&json!({ "type": "browser" }))
            .send()
            .await
            .expect("ask chromedriver for the browser log");
        let status = resp.status();
        let body: Value = resp.json().await.expect("the browser log as JSON");
        assert!(status.is_success(), "browser log: {status} {body}");
        let entries = body["value"].as_array().expect("a list of log entries");
        entries
            .iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The cookies the current page sees, with their flags (`http_only()`, `secure()`, ...).
    pub(crate) async fn cookies(&self) -> Vec<Cookie<'static>> {
        bounded("read the cookies", self.client.get_all_cookies()).await
    }

    /// Runs `script` as a function body (`arguments[i]` are `args`); returns what it
    /// returns.
    pub(crate) async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        bounded(
            format!("execute {script:?}"),
            self.client.execute(script, args),
        )
        .await
    }

    /// One try of a polled command: its error as text, a hung command as an error too.
    async fn attempt<T, E: Display>(
        &self,
        command: impl Future<Output = Result<T, E>>,
    ) -> Result<T, String> {
        match timeout(COMMAND_TIMEOUT, command).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no answer within {COMMAND_TIMEOUT:?}")),
        }
    }
}

/// The chromedriver process. It stays in the test's process group, so that a Ctrl-C reaches
/// it and Chromium alike.
struct Driver {
    child: Child,
    /// The browser's directory, which every Chromium process names on its command line.
    dir: PathBuf,
}

impl Driver {
    /// Starts chromedriver with its log (`chromedriver.log`) and temporary files in `dir`.
    fn spawn(port: u16, dir: &Path) -> Driver {
        let binary = chromedriver_binary();
        // A log file rather than pipes: nobody reads pipes, and a full one would block
        // Chromium, which writes to chromedriver's stderr.
        let out = File::create(dir.join("chromedriver.log")).expect("create the chromedriver log");
        let err = out.try_clone().expect("open the chromedriver log");
        let child = Command::new(&binary)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // chromedriver's and Chromium's scratch directories (which a killed process
            // leaves behind) and Chromium's crash database (else in ~/.config) go where the
            // Browser removes them; the latter also puts `dir` on crashpad's command line.
            .env("TMPDIR", dir)
            .env("XDG_CONFIG_HOME", dir)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}; {INSTALL}", binary.display()));
        Driver {
            child,
            dir: dir.to_owned(),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Chromium outlives a killed chromedriver, its processes are not our children, and
        // they fork: kill those naming our directory until none is left.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        loop {
            let left = processes_naming(&self.dir);
            if left.is_empty() || std::time::Instant::now() >= deadline {
                break;
            }
            for pid in left {
                let _ = kill_process(pid, Signal::KILL);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The processes whose command line names a path under `dir`. Zombies, whose command line
/// is empty, are not among them: they are dead, and init reaps them in its own time.
fn processes_naming(dir: &Path) -> Vec<Pid> {
    let mut needle = dir.as_os_str().as_bytes().to_vec();
    needle.push(b'/');
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .flatten()
        .filter_map(|process| {
            let pid = process.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(process.path().join("cmdline")).ok()?;
            if cmdline.windows(needle.len()).any(|w| w == needle) {
                Pid::from_raw(pid)
            } else {
                None
            }
        })
        .collect()
}

/// Polls chromedriver's `/status` until it says ready.
async fn wait_ready(http: &reqwest::Client, driver_url: &str, driver: &mut Driver, log: &Path) {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(resp) = http.get(format!("{driver_url}/status")).send().await {
            if let Ok(status) = resp.json::<Value>().await {
                if status["value"]["ready"] == true {
                    return;
                }
            }
        }
        if let Some(exit) = driver.child.try_wait().expect("chromedriver's state") {
            panic!(
                "chromedriver exited ({exit}) before it was ready; its log:\n{}",
                read_log(log)
            );
        }
        if Instant::now() >= deadline {
            panic!(
                "chromedriver not ready within {READY_TIMEOUT:?}; its log:\n{}",
                read_log(log)
            );
        }
        sleep(POLL_INTERVAL).await;
    }
}

/// Runs one WebDriver command, bounded; panics naming `what` when it fails.
async fn bounded<T, E: Display>(
    what: impl Display,
    command: impl Future<Output = Result<T, E>>,
) -> T {
    match timeout(COMMAND_TIMEOUT, command).await {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => panic!("{what}: {e}"),
        Err(_) => panic!("{what}: no answer within {COMMAND_TIMEOUT:?}"),
    }
}

fn chromedriver_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMEDRIVER") {
        return path.into();
    }
    let debian = PathBuf::from("/usr/bin/chromedriver");
    if debian.exists() {
        debian
    } else {
        "chromedriver".into()
    }
}

fn chromium_binary() -> String {
    let path = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&path).exists(),
        "no Chromium at {path}; {INSTALL}"
    );
    path
}

fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_else(|e| format!("(unreadable: {e})"))
}

/// The workspace's target directory, where the screenshots go.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => dir.into(),
        None => Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("target"),
    }
}

#[tokio::test]
async fn a_page_of_the_server_loads_without_console_errors_and_is_screenshotted() {
    let server = TestServer::start().await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/openapi.json", server.base)).await;
    let text = browser
        .wait_for_text("body", "\"openapi\"", Duration::from_secs(10))
        .await;
    assert!(text.contains("delayq"), "{text}");
    // Chromium asks every page's server for /favicon.ico unless the page links an icon;
    // this server has none, and that 404 is a console error. It is the only one allowed.
    let errors: Vec<String> = browser
        .console_errors()
        .await
        .into_iter()
        .filter(|e| !e.contains("/favicon.ico - "))
        .collect();
    assert_eq!(errors, Vec::<String>::new());

    let path = browser.screenshot("harness-openapi").await;
    let png = std::fs::read(&path).expect("read the screenshot back");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG: {path:?}");

    browser.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn console_errors_are_caught() {
    let browser = Browser::start().await;
    browser.execute("console.error('boom')", vec![]).await;
    let errors = browser.console_errors().await;
    assert!(errors.iter().any(|e| e.contains("boom")), "{errors:?}");
    browser.close().await;
}

#[tokio::test]
async fn the_window_narrows_to_a_phone() {
    let browser = Browser::start().await;
    browser.set_window_width(390).await;
    let width = browser.execute("return window.innerWidth", vec![]).await;
    assert_eq!(width, json!(390));
    browser.close().await;
}
