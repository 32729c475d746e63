//! A TCP proxy between clients and a `redis-server`, for faults that a server alone cannot
//! produce: replies that arrive late (a network stall right after Redis ran a command),
//! requests that arrive late, every connection cut at once, and a connection left half-open
//! (it stays established but nothing gets through, as behind a dead router).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

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

/// Copies `from` to `to`, holding each chunk back by the delay current when it arrived, and
/// swallowing it once the connection is silenced.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    shared: &Shared,
    link: &LinkState,
    delay: impl Fn(&Shared) -> &AtomicU64,
) {
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
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    link.closed.store(true, Ordering::SeqCst);
    if link.silenced.load(Ordering::SeqCst) {
        // Half-open: the other side hears of nothing, not even a close.
        return;
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
