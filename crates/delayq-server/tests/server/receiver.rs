//! A push receiver for the tests: a real HTTP server on a loopback port that records every
//! request (when it began and ended, headers, body) and answers as the test scripted it.

#![allow(dead_code)] // each test uses its own subset

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;

/// One answer: a status with headers and a body, or no answer for this long.
#[derive(Clone, Debug)]
pub enum Answer {
    Status(u16, Vec<(&'static str, String)>, String),
    Hang(Duration),
    /// Work on the request this long, then answer 200. The work goes on if the client goes
    /// away meanwhile, as a real receiver's does: the request counts as in progress (for
    /// [`Receiver::max_concurrent_per_id`]) until the work is done.
    Work(Duration),
}

/// A request as received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub began_ms: u64,
    pub ended_ms: u64,
    /// When the client went away before the answer (0: it did not).
    pub cut_ms: u64,
}

impl Seen {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Inner {
    seen: Vec<Seen>,
    /// Answers per message id, in order; once used up, 200.
    script: HashMap<String, VecDeque<Answer>>,
    /// Requests in progress per message id, and the most at once seen.
    in_progress: HashMap<String, usize>,
    max_concurrent_per_id: usize,
    /// The answer to every request on a path that its id's script does not answer.
    path_answers: HashMap<String, Answer>,
    /// Requests in progress per path, and the most at once seen on each.
    in_progress_on_path: HashMap<String, usize>,
    max_concurrent_on_path: HashMap<String, usize>,
}

/// The receiver: its base URL, and what it saw.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        Self::start_on("127.0.0.1").await
    }

    /// A receiver on another loopback address (`127.0.0.2`): a host of its own, for tests
    /// of which addresses pushes may reach.
    pub async fn start_on(ip: &str) -> Receiver {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(inner.clone());
        let listener = TcpListener::bind((ip, 0)).await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { url, inner }
    }

    /// Answers the requests for message `id` with `answers`, in order (then 200).
    pub fn script(&self, id: &str, answers: Vec<Answer>) {
        self.lock().script.insert(id.to_owned(), answers.into());
    }

    /// Answers every request on `path` with `answer`, unless its message id has a script.
    pub fn answer_path(&self, path: &str, answer: Answer) {
        self.lock().path_answers.insert(path.to_owned(), answer);
    }

    /// The most requests on `path` that were in progress at once.
    pub fn max_concurrent_on(&self, path: &str) -> usize {
        self.lock()
            .max_concurrent_on_path
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.lock().seen.clone()
    }

    /// Requests that carried message `id`.
    pub fn for_id(&self, id: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.header("delayq-message-id") == id)
            .collect()
    }

    /// The most requests for one message that were in progress at once.
    pub fn max_concurrent_per_id(&self) -> usize {
        self.lock().max_concurrent_per_id
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Ends a request's record when its handler ends, answered or dropped (the client gave up).
struct Ending {
    inner: Arc<Mutex<Inner>>,
    id: String,
    path: String,
    index: usize,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = inner.in_progress.get_mut(&self.id) {
            *n -= 1;
        }
        if let Some(n) = inner.in_progress_on_path.get_mut(&self.path) {
            *n -= 1;
        }
        if let Some(seen) = inner.seen.get_mut(self.index) {
            seen.ended_ms = now_ms();
        }
    }
}

/// Notes when a request's handler is dropped before it answered: the client went away.
struct Cut {
    inner: Arc<Mutex<Inner>>,
    index: usize,
    answered: bool,
}

impl Drop for Cut {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seen) = inner.seen.get_mut(self.index) {
            seen.cut_ms = now_ms();
        }
    }
}

async fn answer(
    State(inner): State<Arc<Mutex<Inner>>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let id = headers
        .get("delayq-message-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let (next, index) = {
        let mut guard = inner.lock().unwrap_or_else(|p| p.into_inner());
        let n = guard.in_progress.entry(id.clone()).or_default();
        *n += 1;
        let n = *n;
        guard.max_concurrent_per_id = guard.max_concurrent_per_id.max(n);
        let path = uri.path().to_owned();
        let on_path = guard.in_progress_on_path.entry(path.clone()).or_default();
        *on_path += 1;
        let on_path = *on_path;
        let most = guard.max_concurrent_on_path.entry(path).or_default();
        *most = (*most).max(on_path);
        guard.seen.push(Seen {
            path: uri.path().to_owned(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            body: body.to_vec(),
            began_ms: now_ms(),
            ended_ms: 0,
            cut_ms: 0,
        });
        let index = guard.seen.len() - 1;
        let scripted = guard.script.get_mut(&id).and_then(VecDeque::pop_front);
        let next = scripted.or_else(|| guard.path_answers.get(uri.path()).cloned());
        (next, index)
    };
    let ending = Ending {
        inner: inner.clone(),
        id,
        path: uri.path().to_owned(),
        index,
    };
    match next.unwrap_or(Answer::Status(200, vec![], "ok".into())) {
        Answer::Work(d) => {
            let mut cut = Cut {
                inner,
                index,
                answered: false,
            };
            let work = tokio::spawn(async move {
                let _ending = ending;
                tokio::time::sleep(d).await;
            });
            let _ = work.await;
            cut.answered = true;
            (StatusCode::OK, "done").into_response()
        }
        Answer::Hang(d) => {
            let _ending = ending;
            tokio::time::sleep(d).await;
            (StatusCode::OK, "late").into_response()
        }
        Answer::Status(code, extra, text) => {
            let _ending = ending;
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            let mut response = (status, text).into_response();
            for (name, value) in extra {
                if let Ok(v) = value.parse() {
                    response.headers_mut().insert(name, v);
                }
            }
            response
        }
    }
}
