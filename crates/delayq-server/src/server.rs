//! Running the server: a bound listener, the state, and a shutdown future. Tests bind
//! `127.0.0.1:0` and run it in-process; `main.rs` adds flags, signals and Redis.
//!
//! Connections are served by hyper (HTTP/1.1) with a timer, rather than by `axum::serve`,
//! which sets none: there, a client that trickles its headers (slowloris) or opens
//! connections and sends nothing holds them for ever. Here (`Limits`): the head of each
//! request, and the wait for the next one on a kept-alive connection, must arrive within the
//! header timeout; a head is at most `max_header_bytes` (431 beyond); a body must arrive
//! within the body timeout (408, in `api/wire.rs`); and beyond `max_connections` new
//! connections are closed as soon as they are accepted, so a flood of them costs one file
//! descriptor each for an instant, not a slot; likewise beyond `max_connections_per_peer`
//! from one peer, so that one client cannot take every slot from the others. A peer is an
//! IPv4 address, or an IPv6 /64: one host is routinely given a whole /64, so counting its
//! addresses one by one would give it 2^64 caps.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::slots::{Slot, SlotCounts};
use crate::state::AppState;

/// Serves the API on `listener` until `shutdown` completes; then stops accepting, answers
/// held long-polls (empty), and returns once every request in progress has finished. Runs a
/// scheduler of every queue's recurring schedules meanwhile (`delayq::Scheduler`), and the
/// push delivery of every queue with a push target (`push::runtime`) and the webhooks of
/// every queue with some (`webhooks::runtime`): any number of servers can run against one
/// Redis, and each tick still becomes one message, each push one request at a time, each
/// webhook called by one server.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.limits().clone();
    let service = TowerToHyperService::new(crate::app::router(state.clone()));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(limits.max_header_bytes);
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let peers = Arc::new(PeerCounts::default());
    let graceful = GracefulShutdown::new();
    let pusher = match crate::push::clients::Clients::new(crate::push::address::AddressPolicy::new(
        limits.push_allow.clone(),
    )) {
        Ok(clients) => {
            use crate::push::callbacks;
            let (reports, backlog) = callbacks::channel(callbacks::BACKLOG);
            state.set_callbacks(reports.clone());
            // Callbacks go on until the push runtime has stopped (its last requests may
            // still make dead letters).
            let (stop_callbacks, callbacks_stopped) = tokio::sync::oneshot::channel::<()>();
            let sender = tokio::spawn(backlog.serve(
                state.dq().clone(),
                clients.clone(),
                callbacks::CONCURRENCY,
                async move {
                    let _ = callbacks_stopped.await;
                },
            ));
            let state = state.clone();
            let hooks = {
                let (dq, clients, state) = (state.dq().clone(), clients.clone(), state.clone());
                tokio::spawn(async move {
                    crate::webhooks::runtime::run(dq, clients, state.shutdown_started()).await;
                })
            };
            Some(tokio::spawn(async move {
                let dq = state.dq().clone();
                crate::push::runtime::run(dq, clients, reports, state.shutdown_started()).await;
                let _ = hooks.await;
                let _ = stop_callbacks.send(());
                let _ = sender.await;
            }))
        }
        Err(e) => {
            tracing::error!("push delivery is off: {e}");
            None
        }
    };
    let scheduler = tokio::spawn({
        let state = state.clone();
        async move {
            delayq::Scheduler::new(state.dq())
                .run(state.shutdown_started())
                .await;
        }
    });
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to close.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = open.clone().try_acquire_owned() else {
            // Closed unanswered: the client fails fast instead of waiting in a queue.
            drop(stream);
            continue;
        };
        let peer_slot = match limits.max_connections_per_peer {
            Some(cap) => match take_peer_slot(&peers, peer.ip(), cap) {
                Some(taken) => Some(taken),
                None => {
                    drop(stream);
                    continue;
                }
            },
            None => None,
        };
        let _ = stream.set_nodelay(true);
        // The peer's address goes with each request that may change something, for the audit
        // log (`audit/mod.rs`); reads, the most requests, go without.
        let with_peer = {
            let service = service.clone();
            hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                if request.method() != hyper::Method::GET {
                    request
                        .extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                }
                hyper::service::Service::call(&service, request)
            })
        };
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), with_peer));
        tokio::spawn(async move {
            // A client that goes away mid-request is its own problem, not the server's.
            let _ = conn.await;
            drop(slot);
            drop(peer_slot);
        });
    }
    drop(listener);
    state.begin_shutdown();
    graceful.shutdown().await;
    let _ = scheduler.await;
    if let Some(pusher) = pusher {
        let _ = pusher.await;
    }
    // Nothing more of this process will reach Redis: an upgrade of the data format need not
    // wait out its announcement's lease.
    if let Err(e) = state.dq().withdraw().await {
        tracing::warn!(error = %e, "could not take back this process's announcement");
    }
    Ok(())
}

/// Connections open per peer (see [`peer_of`]).
type PeerCounts = SlotCounts<IpAddr>;

/// The peer an address counts against: an IPv4 address itself (also when it comes mapped
/// into IPv6), an IPv6 address's /64.
fn peer_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from_bits(
                v6.to_bits() & !((1u128 << 64) - 1),
            )),
        },
    }
}

/// A place for a connection from `ip`, if its peer has fewer than `cap` open.
fn take_peer_slot(counts: &Arc<PeerCounts>, ip: IpAddr, cap: usize) -> Option<Slot<IpAddr>> {
    SlotCounts::take(counts, peer_of(ip), cap, None).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_peers_of_one_64_share_a_count_and_ipv4_ones_do_not() {
        let counts = Arc::new(PeerCounts::default());
        let a: IpAddr = "2001:db8:1:2::1".parse().expect("an address");
        let b: IpAddr = "2001:db8:1:2:ffff:0:0:9".parse().expect("an address");
        let other_net: IpAddr = "2001:db8:1:3::1".parse().expect("an address");
        let held_a = take_peer_slot(&counts, a, 2);
        let held_b = take_peer_slot(&counts, b, 2);
        assert!(held_a.is_some() && held_b.is_some());
        assert!(
            take_peer_slot(&counts, "2001:db8:1:2::77".parse().expect("an address"), 2).is_none(),
            "a third address of the same /64 is over the cap of 2"
        );
        assert!(take_peer_slot(&counts, other_net, 2).is_some());
        drop(held_a);
        assert!(take_peer_slot(&counts, b, 2).is_some());

        // IPv4 addresses count one by one, and an IPv4-mapped IPv6 peer as its IPv4 address.
        let v4: IpAddr = "192.0.2.1".parse().expect("an address");
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("an address");
        let _one = take_peer_slot(&counts, v4, 1).expect("first");
        assert!(take_peer_slot(&counts, mapped, 1).is_none());
        assert!(take_peer_slot(&counts, "192.0.2.2".parse().expect("an address"), 1).is_some());
    }
}
