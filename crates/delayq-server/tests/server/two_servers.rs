//! Two servers on one Redis, as a team runs them behind a load balancer. Each exports the
//! same gauges read from Redis, so the shipped Grafana dashboard and alert rules must not add
//! them up. The test makes real work (ready messages nobody takes, and a consumer that dies
//! holding one), scrapes both servers, and hands the two scrapes to `promtool test rules` as
//! two instances: the dashboard's panels must show each count once, and the lag alert must
//! fire once per queue, for the stuck work too. The gauges are carried forward as they would
//! evolve: counts stay, ages grow a minute a minute.

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;
use crate::serve::Serve;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");

/// The gauges read from Redis, which every server exports alike.
const FROM_REDIS: [&str; 6] = [
    "delayq_messages",
    "delayq_oldest_ready_lag_seconds",
    "delayq_overdue_messages",
    "delayq_oldest_overdue_seconds",
    "delayq_queue_paused",
    "delayq_redis_up",
];

/// Minutes of series handed to promtool.
const MINUTES: u32 = 12;

/// promtool's input series for one scrape of `instance`: each Redis-derived sample, with the
/// scrape job's labels, held for [`MINUTES`] (an age grows by 60 s a minute).
fn input_series(instance: &str, scrape: &str) -> String {
    let mut out = format!(
        "      - series: 'up{{job=\"delayq\", instance=\"{instance}\"}}'\n        values: '1+0x{MINUTES}'\n"
    );
    for line in scrape.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = series.split('{').next().unwrap_or_default();
        if !FROM_REDIS.contains(&name) {
            continue;
        }
        let value: f64 = value.parse().expect("a sample's value");
        let labels = series
            .strip_prefix(name)
            .and_then(|l| l.strip_prefix('{'))
            .and_then(|l| l.strip_suffix('}'))
            .unwrap_or_default();
        let extra = format!("job=\"delayq\", instance=\"{instance}\"");
        let labels = if labels.is_empty() {
            extra
        } else {
            format!("{labels}, {extra}")
        };
        let step = if name.contains("oldest") && value > 0.0 {
            60
        } else {
            0
        };
        let _ = writeln!(
            out,
            "      - series: '{name}{{{labels}}}'\n        values: '{value}+{step}x{MINUTES}'"
        );
    }
    out
}

/// The expression of the dashboard panel titled `title` (its target `ref_id`), for every
/// queue (`$queue` as `.*`).
fn panel_expr(dashboard: &Value, title: &str, ref_id: &str) -> String {
    let panel = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .find(|p| p["title"] == title)
        .unwrap_or_else(|| panic!("no panel {title:?} in the dashboard"));
    let target = panel["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .find(|t| t["refId"] == ref_id)
        .unwrap_or_else(|| panic!("no target {ref_id} in {title:?}"));
    target["expr"]
        .as_str()
        .expect("expr")
        .replace("$queue", ".*")
}

/// A `promql_expr_test` case: `expr` at `at` gives exactly `samples` (labels, value).
fn expr_case(expr: &str, at: &str, samples: &[(&str, f64)]) -> String {
    let mut out = format!(
        "      - expr: '{}'\n        eval_time: {at}\n        exp_samples:\n",
        expr.replace('\'', "''")
    );
    for (labels, value) in samples {
        let _ = writeln!(
            out,
            "          - labels: '{labels}'\n            value: {value}"
        );
    }
    out
}

/// "10m 3s", as Prometheus's humanizeDuration writes an age of a few minutes.
fn humanized(seconds: f64) -> String {
    let s = seconds as u64;
    format!("{}m {}s", s / 60, s % 60)
}

/// The sample `name{labels}` of a scrape.
fn sample(scrape: &str, name_and_labels: &str) -> f64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name_and_labels} in:\n{scrape}"))
}

/// The PromQL of the KEDA example: the folded block after `query: >-`.
fn keda_query() -> String {
    let text = std::fs::read_to_string(format!(
        "{DEPLOY}/kubernetes/autoscaling/keda-scaledobject.yaml"
    ))
    .expect("the KEDA example");
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim().starts_with("query: >-"));
    let indent = |l: &str| l.len() - l.trim_start().len();
    let head = indent(lines.next().expect("query: >-"));
    let query: Vec<&str> = lines
        .take_while(|l| indent(l) > head)
        .map(str::trim)
        .collect();
    query.join(" ")
}

#[tokio::test]
async fn the_dashboard_and_alerts_count_two_servers_on_one_redis_once() {
    let redis = redis_fixture::RedisServer::start();
    let a = Serve::start(&["--redis-url", &redis.url()], &[]).await;
    let b = Serve::start(&["--redis-url", &redis.url()], &[]).await;
    // orders: 3 ready (sent through a), 2 delayed an hour (through b).
    for i in 0..3 {
        let (status, _) = a
            .post("/v1/queues/orders/messages", json!({ "payload": i }))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    for i in 0..2 {
        let body = json!({ "payload": i, "delay": "1h" });
        let (status, _) = b.post("/v1/queues/orders/messages", body).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    // stuck: its one message taken by a consumer that then dies (it never acks, and no
    // other consumer claims): in flight, ready 0, its lease over.
    a.post("/v1/queues/stuck/messages", json!({ "payload": "x" }))
        .await;
    let (_, taken) = b
        .post(
            "/v1/queues/stuck/receive",
            json!({ "max": 1, "lease": "50ms" }),
        )
        .await;
    assert_eq!(
        taken["deliveries"].as_array().map(Vec::len),
        Some(1),
        "{taken}"
    );
    wait_until(
        Duration::from_secs(5),
        "the lease to be a second past",
        || async {
            let (_, s) = a.get("/v1/queues/stuck").await;
            s["overdue"] == 1 && s["oldest_overdue_ms"].as_u64() >= Some(1000)
        },
    )
    .await;
    let (_, stats) = a.get("/v1/queues/stuck").await;
    assert_eq!(
        [
            &stats["ready"],
            &stats["in_flight"],
            &stats["oldest_ready_lag_ms"]
        ],
        [&json!(0), &json!(1), &json!(0)],
        "{stats}"
    );

    let (_, scrape_a) = a.get_text("/metrics").await;
    let (_, scrape_b) = b.get_text("/metrics").await;
    for scrape in [&scrape_a, &scrape_b] {
        let ready = "delayq_messages{queue=\"orders\",state=\"ready\"}";
        assert_eq!(sample(scrape, ready), 3.0, "{scrape}");
        assert_eq!(
            sample(scrape, "delayq_overdue_messages{queue=\"stuck\"}"),
            1.0
        );
        assert!(sample(scrape, "delayq_oldest_overdue_seconds{queue=\"stuck\"}") >= 1.0);
    }

    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{DEPLOY}/grafana/delayq-dashboard.json"))
            .expect("dashboard"),
    )
    .expect("the dashboard is JSON");
    let waiting = "Oldest waiting message: ready past its due time, or held past its lease";
    let overdue_now = sample(&scrape_a, "delayq_oldest_overdue_seconds{queue=\"stuck\"}").max(
        sample(&scrape_b, "delayq_oldest_overdue_seconds{queue=\"stuck\"}"),
    );
    let orders_lag = sample(
        &scrape_a,
        "delayq_oldest_ready_lag_seconds{queue=\"orders\"}",
    )
    .max(sample(
        &scrape_b,
        "delayq_oldest_ready_lag_seconds{queue=\"orders\"}",
    ));
    let mut exprs = String::new();
    exprs += &expr_case(
        &panel_expr(&dashboard, "Messages pending", "A"),
        "0m",
        &[("{}", 5.0)],
    );
    exprs += &expr_case(
        &panel_expr(&dashboard, "Dead letters", "A"),
        "0m",
        &[("{}", 0.0)],
    );
    exprs += &expr_case(
        &panel_expr(&dashboard, "Paused queues", "A"),
        "0m",
        &[("{}", 0.0)],
    );
    exprs += &expr_case(
        &panel_expr(&dashboard, "Messages by state", "A"),
        "0m",
        &[
            ("{state=\"delayed\"}", 2.0),
            ("{state=\"ready\"}", 3.0),
            ("{state=\"in_flight\"}", 1.0),
            ("{state=\"dead\"}", 0.0),
        ],
    );
    exprs += &expr_case(
        &panel_expr(&dashboard, waiting, "B"),
        "0m",
        &[
            ("{queue=\"orders\"}", 0.0),
            ("{queue=\"stuck\"}", overdue_now),
        ],
    );

    // The autoscaling example's query (deploy/kubernetes): the work waiting in "orders", once.
    exprs += &expr_case(&keda_query(), "0m", &[("{}", 3.0)]);

    // At 10m the lag alert (over 60 s for 5 minutes) fires once for each queue: orders for
    // its ready messages, stuck for the lease that ended.
    let rules =
        std::fs::read_to_string(format!("{DEPLOY}/prometheus/delayq-alerts.yml")).expect("rules");
    assert!(rules.contains("alert: DelayqQueueLag"));
    let description = |q: &str| {
        format!(
            "The oldest ready message of {q}, or one held past its lease, has waited over a \
             minute for 5 minutes: consumers are too few, stopped or stuck, or the queue is \
             paused. `delayq stats {q}` shows which (ready, overdue), `delayq processes` who runs \
             and when each was last seen, `delayq list {q} --state in_flight` what is held."
        )
    };
    let mut alerts = String::new();
    for (queue, age) in [("orders", orders_lag), ("stuck", overdue_now)] {
        let _ = write!(
            alerts,
            "          - exp_labels: {{ severity: warning, queue: {queue} }}\n            \
             exp_annotations:\n              summary: \"Queue {queue}: messages wait {} past \
             their due time\"\n              description: \"{}\"\n",
            humanized(age + 600.0),
            description(queue)
        );
    }
    let series: String = [("a:7400", &scrape_a), ("b:7400", &scrape_b)]
        .iter()
        .map(|(instance, scrape)| input_series(instance, scrape))
        .collect();
    let test = format!(
        "rule_files:\n  - {DEPLOY}/prometheus/delayq-alerts.yml\nevaluation_interval: 1m\n\
         tests:\n  - interval: 1m\n    input_series:\n{series}    promql_expr_test:\n{exprs}    \
         alert_rule_test:\n      - eval_time: 10m\n        alertname: DelayqQueueLag\n        \
         exp_alerts:\n{alerts}      - eval_time: 10m\n        alertname: DelayqDown\n        \
         exp_alerts: []\n      - eval_time: 10m\n        alertname: DelayqRedisUnavailable\n        \
         exp_alerts: []\n"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("two-servers.test.yml");
    std::fs::write(&file, &test).expect("write the promtool test");
    let out = Command::new("promtool")
        .arg("test")
        .arg("rules")
        .arg(&file)
        .output()
        .expect("promtool (Debian's prometheus package; .ci/run installs it)");
    assert!(
        out.status.success(),
        "promtool:\n{}{}\nthe test:\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
