//! A TCP proxy between clients and a `redis-server`, for faults that a server alone cannot
//! produce: replies that arrive late (a network stall right after Redis ran a command),
//! requests that arrive late, and every connection cut at once.

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
    /// Both ends of every connection, so that `cut_all` can close them.
    streams: Mutex<Vec<TcpStream>>,
    stopped: AtomicBool,
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

    /// Closes every connection open now (clients see them dropped); new ones are accepted.
    pub fn cut_all(&self) {
        let streams = std::mem::take(&mut *lock(&self.shared.streams));
        for s in streams {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.cut_all();
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
        let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
            continue;
        };
        {
            let mut streams = lock(&shared.streams);
            for s in [&client, &server] {
                if let Ok(s) = s.try_clone() {
                    streams.push(s);
                }
            }
        }
        let up = shared.clone();
        thread::spawn(move || pump(client, server, &up, |s| &s.request_delay_us));
        let down = shared.clone();
        thread::spawn(move || pump(s2, c2, &down, |s| &s.reply_delay_us));
    }
}

/// Copies `from` to `to`, holding each chunk back by the delay current when it arrived.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    shared: &Shared,
    delay: impl Fn(&Shared) -> &AtomicU64,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let hold = Duration::from_micros(delay(shared).load(Ordering::SeqCst));
        if !hold.is_zero() {
            thread::sleep(hold);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}
