//! A TCP proxy between clients and a `redis-server`, for faults that a server alone cannot
//! produce: replies that arrive late (a network stall right after Redis ran a command),
//! requests that arrive late, a slow and lossy network (latency with jitter, and lost
//! packets as TCP shows them to a program: stalls), every connection cut at once, and a
//! connection left half-open (it stays established but nothing gets through, as behind a
//! dead router).
//!
//! The slow network is a delay line, not a sleep: each chunk is released at its arrival plus
//! a latency drawn afresh (never before the chunk ahead of it, as TCP keeps order), so a
//! connection's throughput is not cut by its latency, as it would be by a sleep per chunk.
//! It stands in for `tc netem`, which not every kernel has (the one this project's machines
//! run has none).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Forwards connections from `127.0.0.1:port()` to a server's port. Each direction can be
/// held back by a delay that applies to bytes read from then on. Stops accepting and cuts
/// every connection on drop.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Microseconds each chunk from client to server is held back.
    request_delay_us: AtomicU64,
    /// Microseconds each chunk from server to client is held back.
    reply_delay_us: AtomicU64,
    /// The slow network, both ways: see [`Proxy::set_network`].
    latency_us: AtomicU64,
    jitter_us: AtomicU64,
    loss_per_million: AtomicU64,
    /// Every open connection, so that `cut_all` can close them and `hold_half_open` can
    /// silence one.
    links: Mutex<Vec<Link>>,
    stopped: AtomicBool,
}

/// One proxied connection: both of its sockets and what its pumps share.
struct Link {
    streams: [TcpStream; 2],
    state: Arc<LinkState>,
}

#[derive(Default)]
struct LinkState {
    /// Held half-open: whatever arrives is swallowed.
    silenced: AtomicBool,
    /// Set once either direction has ended.
    closed: AtomicBool,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:target_port` on a free loopback port.
    pub fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .expect("proxy: cannot bind a loopback port");
        let port = listener.local_addr().expect("proxy: local address").port();
        let shared = Arc::new(Shared::default());
        let accept_shared = shared.clone();
        thread::spawn(move || accept(listener, target_port, accept_shared));
        Proxy { port, shared }
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connection URL through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Holds back every reply read from now on by `delay`.
    pub fn set_reply_delay(&self, delay: Duration) {
        let us = delay.as_micros() as u64;
        self.shared.reply_delay_us.store(us, Ordering::SeqCst);
    }

    /// Holds back every request read from now on by `delay`.
    pub fn set_request_delay(&self, delay: Duration) {
        let us = delay.as_micros() as u64;
        self.shared.request_delay_us.store(us, Ordering::SeqCst);
    }

    /// Makes the network between clients and the server slow and lossy, each way, from now
    /// on: every chunk is delivered `latency` ± `jitter` (uniform) after it arrived, and one
    /// in `loss` (a fraction, 0 to 1) is lost, which TCP hides behind a retransmission: it
    /// comes [`RETRANSMIT`] later, and everything behind it waits for it. Order is kept.
    /// `set_network(ZERO, ZERO, 0.0)` makes it fast again (chunks already held are
    /// delivered when they were due).
    pub fn set_network(&self, latency: Duration, jitter: Duration, loss: f64) {
        let s = &self.shared;
        s.latency_us
            .store(latency.as_micros() as u64, Ordering::SeqCst);
        s.jitter_us
            .store(jitter.as_micros() as u64, Ordering::SeqCst);
        let loss = (loss.clamp(0.0, 1.0) * 1e6) as u64;
        s.loss_per_million.store(loss, Ordering::SeqCst);
    }

    /// Closes every connection open now (clients see them dropped), except those held
    /// half-open, which stay silent; new ones are accepted.
    pub fn cut_all(&self) {
        self.close(|l| !l.state.silenced.load(Ordering::SeqCst));
    }

    fn close(&self, which: impl Fn(&Link) -> bool) {
        let mut links = lock(&self.shared.links);
        for link in links.iter().filter(|l| which(l)) {
            for s in &link.streams {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        links.retain(|l| !which(l));
    }

    /// Leaves connection number `pick` (modulo the open ones, oldest first) half-open: it
    /// stays established, but from now on whatever either side sends is swallowed and no
    /// close is passed on (not even by [`cut_all`](Self::cut_all) or a dying server), so its
    /// client hears nothing until it gives up on its own. Returns false when
    /// no connection is open.
    pub fn hold_half_open(&self, pick: usize) -> bool {
        let mut links = lock(&self.shared.links);
        // Connections whose pumps ended are gone already; forget them.
        links.retain(|l| !l.state.closed.load(Ordering::SeqCst));
        let live: Vec<&Link> = links
            .iter()
            .filter(|l| !l.state.silenced.load(Ordering::SeqCst))
            .collect();
        if live.is_empty() {
            return false;
        }
        live[pick % live.len()]
            .state
            .silenced
            .store(true, Ordering::SeqCst);
        true
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.close(|_| true);
        // Wakes the accept loop so that it sees `stopped`.
        let _ = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port));
    }
}

/// How late a lost packet arrives: Linux's least retransmission timeout.
pub const RETRANSMIT: Duration = Duration::from_millis(200);

impl Shared {
    /// How long after its arrival a chunk is delivered, by the slow network's settings now.
    fn transit(&self, rng: &mut u64) -> Duration {
        let latency = self.latency_us.load(Ordering::SeqCst);
        let jitter = self.jitter_us.load(Ordering::SeqCst);
        let loss = self.loss_per_million.load(Ordering::SeqCst);
        if latency == 0 && jitter == 0 && loss == 0 {
            return Duration::ZERO;
        }
        let mut us = latency;
        if jitter > 0 {
            us = (latency + next(rng) % (2 * jitter + 1)).saturating_sub(jitter);
        }
        if loss > 0 && next(rng) % 1_000_000 < loss {
            us += RETRANSMIT.as_micros() as u64;
        }
        Duration::from_micros(us)
    }
}

/// xorshift64: jitter and loss need no more than this, and the fixture no crate for it.
fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn accept(listener: TcpListener, target_port: u16, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let Ok(server) = TcpStream::connect((Ipv4Addr::LOCALHOST, target_port)) else {
            // The server is down: the client sees its connection closed, as it would.
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        let state = Arc::new(LinkState::default());
        lock(&shared.links).push(Link {
            streams: [c3, s3],
            state: state.clone(),
        });
        let up = shared.clone();
        let up_state = state.clone();
        thread::spawn(move || pump(client, server, &up, &up_state, |s| &s.request_delay_us));
        let down = shared.clone();
        thread::spawn(move || pump(s2, c2, &down, &state, |s| &s.reply_delay_us));
    }
}

/// Copies `from` to `to`, holding each chunk back by the delay current when it arrived (the
/// reader waits), then through the slow network's delay line (a writer of its own releases
/// each chunk in turn), and swallowing it once the connection is silenced.
fn pump(
    mut from: TcpStream,
    to: TcpStream,
    shared: &Shared,
    link: &Arc<LinkState>,
    delay: impl Fn(&Shared) -> &AtomicU64,
) {
    let (line, held) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = {
        let (link, from) = (link.clone(), from.try_clone());
        thread::spawn(move || deliver(held, to, &link, from.ok()))
    };
    let mut rng = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    let mut last = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if link.silenced.load(Ordering::SeqCst) {
            continue;
        }
        let hold = Duration::from_micros(delay(shared).load(Ordering::SeqCst));
        if !hold.is_zero() {
            thread::sleep(hold);
        }
        // Never before the chunk ahead of it: TCP delivers in order.
        last = last.max(Instant::now() + shared.transit(&mut rng));
        if line.send((last, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(line);
    let _ = writer.join();
    link.closed.store(true, Ordering::SeqCst);
    if link.silenced.load(Ordering::SeqCst) {
        return;
    }
    let _ = from.shutdown(Shutdown::Both);
}

/// Writes the chunks `held` to `to`, each at its time; at the end (the reader stopped, or
/// `to` failed) closes both ways, unless the connection is held half-open.
fn deliver(
    held: mpsc::Receiver<(Instant, Vec<u8>)>,
    mut to: TcpStream,
    link: &LinkState,
    from: Option<TcpStream>,
) {
    for (at, chunk) in held {
        let wait = at.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            thread::sleep(wait);
        }
        if link.silenced.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&chunk).is_err() {
            break;
        }
    }
    if link.silenced.load(Ordering::SeqCst) {
        // Half-open: the other side hears of nothing, not even a close.
        return;
    }
    let _ = to.shutdown(Shutdown::Both);
    if let Some(from) = from {
        let _ = from.shutdown(Shutdown::Both);
    }
}
