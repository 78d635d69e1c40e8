//! The exporter under a real Prometheus (issue 23, items 1 and 2): scraped during a small load,
//! every product's stock read back through Prometheus's API, an injected drift seen as 7 and a
//! shipped alerting rule firing, then clearing after `fix`; the dashboard's queries evaluate.

use crate::harness::cli::{finish, terminate};
use crate::harness::fixtures::{product_keys, redis_cmd};
use crate::harness::prometheus::{Prometheus, get};
use crate::harness::redis_server::free_port;
use crate::harness::{Console, TestDb, Topo};
use std::time::Duration;

fn value(series: &serde_json::Value) -> Option<&str> {
    series["value"][1].as_str()
}

fn firing(p: &Prometheus, alert: &str, product: &str) -> bool {
    p.alerts().iter().any(|a| {
        a["labels"]["alertname"] == alert
            && a["labels"]["product"] == product
            && a["state"] == "firing"
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_exporter_and_a_shipped_rule_fires_and_clears() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(
        &lib,
        "prom",
        &[("p1", 100, 5), ("p2", 80, 5), ("p3", 60, 5)],
    )
    .await;
    let listen = format!("127.0.0.1:{}", free_port());
    let exporter = c.spawn(&[
        "--read-only",
        "exporter",
        "--listen",
        &listen,
        "--interval",
        "0.5",
        "prom",
    ]);
    let prom = Prometheus::scraping(&listen);
    let load = c.spawn("load prom --yes --buyers 40 --concurrency 4 --seed 7 --pay-share 1");
    finish(load, Duration::from_secs(120)).expect_code(0);

    // Every product's stock, as Redis holds it once the load is over.
    for product in ["p1", "p2", "p3"] {
        let k = product_keys("prom", product);
        let redis = match redis_cmd(&store, &["GET", &k.stock]).await {
            redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
            other => panic!("{other:?}"),
        };
        let q = format!(r#"seckill_stock_remaining{{activity="prom",product="{product}"}}"#);
        prom.wait_for(&format!("{product}'s stock {redis}"), |p| {
            p.query(&q).first().and_then(value) == Some(redis.as_str())
        });
    }
    assert_eq!(prom.query("seckill_stock_remaining").len(), 3);
    assert!(
        prom.query(r#"seckill_sold_units{activity="prom"}"#)
            .iter()
            .any(|s| value(s) != Some("0")),
        "the load sold something"
    );

    // Seven units appear in Redis from nowhere: drift 7, oversell risk, paged by the rule.
    redis_cmd(&store, &["INCRBY", &product_keys("prom", "p1").stock, "7"]).await;
    prom.wait_for("p1's drift of 7", |p| {
        p.query(r#"seckill_drift_units{activity="prom",product="p1"}"#)
            .first()
            .and_then(value)
            == Some("7")
    });
    prom.wait_for("SeckillOversellRisk firing for p1", |p| {
        firing(p, "SeckillOversellRisk", "p1")
    });
    assert!(!firing(&prom, "SeckillOversellRisk", "p2"));
    assert_eq!(
        prom.query(r#"seckill_alerts{activity="prom",kind="drift",severity="critical"}"#)
            .first()
            .and_then(value),
        Some("1")
    );
    c.ok("fix prom --yes");
    prom.wait_for("the drift back to 0 and the alert cleared", |p| {
        p.query(r#"seckill_drift_units{activity="prom",product="p1"}"#)
            .first()
            .and_then(value)
            == Some("0")
            && !p
                .alerts()
                .iter()
                .any(|a| a["labels"]["alertname"] == "SeckillOversellRisk")
    });

    // The dashboard's queries are PromQL that Prometheus evaluates (some are empty on a sale
    // that balances: drift != 0, orphaned > 0); the stock panel's has every product.
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/grafana/seckill.json"
        ))
        .expect("dashboard"),
    )
    .expect("dashboard JSON");
    let panels = dash["panels"].as_array().expect("panels");
    for target in panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
    {
        let expr = target["expr"]
            .as_str()
            .expect("expr")
            .replace("$activity", ".*");
        prom.query(&expr);
    }
    assert!(
        !prom
            .query(r#"seckill_compensation_pending{activity="prom"}"#)
            .is_empty()
    );
    assert_eq!(
        prom.query(r#"seckill_stock_remaining{activity=~".*"}"#)
            .len(),
        3
    );

    let port: u16 = listen
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    assert_eq!(get(port, "/healthz"), Some((200, "ok\n".to_string())));
    terminate(&exporter);
    let run = finish(exporter, Duration::from_secs(30));
    run.expect_code(0);
    assert!(run.stderr.contains("serving http://"), "{}", run.stderr);
    lib.close().await;
}
