//! Finds a Redis for the examples: `$DELAYQ_REDIS_URL` if set, otherwise a private
//! `redis-server` started on a free loopback port (stopped when the example ends).

use redis_fixture::RedisServer;

/// The Redis URL to use, and the server to keep alive while it is used (if we started one).
pub fn redis() -> (String, Option<RedisServer>) {
    match std::env::var("DELAYQ_REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let server = RedisServer::start();
            println!("started a private redis-server on port {}", server.port());
            (server.url(), Some(server))
        }
    }
}
