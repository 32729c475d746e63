//! Secrets in URLs stay out of what the server prints (issue 49, item 13): a Redis URL's
//! password given in the environment is not shown by `--help`, and the OTLP endpoint's
//! credentials are not logged.

use std::process::Command;

use redis_fixture::RedisServer;

use crate::serve::Serve;

#[test]
fn help_does_not_show_a_redis_password_from_the_environment() {
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["serve", "--help"])
        .env(
            "DELAYQ_REDIS_URL",
            "redis://app:R3DIS-PASSWORD@10.0.0.7:6379",
        )
        .env(
            "DELAYQ_REDIS_CLUSTER",
            "redis://app:CLUSTER-PASSWORD@10.0.0.8:6379",
        )
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://u:OTLP-PASSWORD@otel.example",
        )
        .output()
        .expect("delayq serve --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--redis-url"), "{help}");
    for secret in ["R3DIS-PASSWORD", "CLUSTER-PASSWORD", "OTLP-PASSWORD"] {
        assert!(!help.contains(secret), "--help shows {secret}");
    }
}

#[tokio::test]
async fn the_otlp_endpoints_credentials_are_not_logged() {
    let redis = RedisServer::start();
    let serve = Serve::start(
        &[
            "--redis-url",
            &redis.url(),
            "--otlp-endpoint",
            "http://collector:OTLP-SECRET@127.0.0.1:4318/?api-key=QUERY-SECRET",
        ],
        &[],
    )
    .await;
    let log = serve.terminate();
    assert!(log.contains("OTLP"), "the export is logged: {log}");
    assert!(log.contains("127.0.0.1:4318"), "{log}");
    for secret in ["OTLP-SECRET", "QUERY-SECRET"] {
        assert!(!log.contains(secret), "the log shows {secret}: {log}");
    }
}
