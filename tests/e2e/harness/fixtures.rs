//! Activities, products and Redis handles for tests.

use chrono::{DateTime, Duration, Utc};
use seckill_console::db::Db;
use seckill_console::db::activity;
use seckill_console::db::orders::{NewOrder, insert_with_outbox};
use seckill_console::domain::ActivityId;
use seckill_console::domain::import::parse_activity_file;
use seckill_console::ops::preheat::{PreheatOptions, preheat};
use seckill_console::ops::progress::Silent;
use seckill_console::redact::SecretUrl;
use seckill_console::redis::scripts::DEDUCT;
use seckill_console::redis::{KeySpace, Keyed, RedisSettings, RedisStore, RedisTarget};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A product line of a test activity: (id, stock, per-user limit).
pub type P<'a> = (&'a str, i64, i64);

/// The TOML of an activity with a window around `now` (live) unless given.
pub fn activity_toml(
    id: &str,
    products: &[P<'_>],
    starts: DateTime<Utc>,
    ends: DateTime<Utc>,
) -> String {
    let mut s = format!(
        "[activity]\nid = \"{id}\"\nname = \"Test {id}\"\nstarts_at = \"{}\"\nends_at = \"{}\"\n",
        starts.to_rfc3339(),
        ends.to_rfc3339()
    );
    for (p, stock, limit) in products {
        s.push_str(&format!(
            "\n[[products]]\nid = \"{p}\"\nstock = {stock}\nper_user_limit = {limit}\n"
        ));
    }
    s
}

/// A live window: started an hour ago, ends in an hour.
pub fn live_window() -> (DateTime<Utc>, DateTime<Utc>) {
    let now = Utc::now();
    (now - Duration::hours(1), now + Duration::hours(1))
}

/// A future window: starts in a day.
pub fn future_window() -> (DateTime<Utc>, DateTime<Utc>) {
    let now = Utc::now();
    (
        now + Duration::days(1),
        now + Duration::days(1) + Duration::hours(2),
    )
}

pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write test file");
    path
}

/// Imports an activity through the library.
pub async fn import(db: &Db, id: &str, products: &[P<'_>], window: (DateTime<Utc>, DateTime<Utc>)) {
    let text = activity_toml(id, products, window.0, window.1);
    let def = parse_activity_file("test.toml", &text).expect("valid test activity");
    activity::import(
        db,
        &def,
        ("test", "test.toml"),
        &std::collections::HashSet::new(),
    )
    .await
    .expect("import");
}

/// The library's preheat options of a set-up: no force, no eviction accepted, 7-day keys.
pub fn preheat_options(actor: &str, grace: std::time::Duration) -> PreheatOptions {
    PreheatOptions {
        force: false,
        accept_eviction: false,
        actor: actor.into(),
        grace,
        key_ttl_days: 7,
        interleave: Default::default(),
    }
}

/// Preheats an imported activity through the library under the live prefix; a set-up that
/// does not get a go stops there, naming the reasons.
pub async fn preheat_go(store: &RedisStore, db: &Db, activity: &str, grace: std::time::Duration) {
    let id = ActivityId::parse(activity).expect("valid activity");
    let r = preheat(
        store,
        db,
        &KeySpace::default(),
        &id,
        &preheat_options("test", grace),
        &Silent,
    )
    .await
    .expect("preheat");
    assert_eq!(r.decision, "go", "{:?}", r.reasons);
}

/// A sale of `units` on one product, one unit to each buyer (request `r<i>`, user `u<i>`),
/// pipelined ten thousand at a time through `deduct.lua`; then the paid orders of all but the
/// newest `held`, with their outbox rows. Returns the held orders, for the caller to write
/// later (the orders an app server has not committed yet).
pub async fn sell_one_each(
    store: &RedisStore,
    db: &Db,
    (activity, product): (&str, &str),
    units: usize,
    held: usize,
) -> Vec<NewOrder> {
    let keys: Vec<String> = product_keys(activity, product)
        .script_keys()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let order = |i: usize| NewOrder {
        order_id: format!("o{i}"),
        request_id: format!("r{i}"),
        activity_id: activity.into(),
        product_id: product.into(),
        user_id: format!("u{i}"),
        quantity: 1,
        status: seckill_console::domain::order::OrderStatus::Paid,
    };
    let started = std::time::Instant::now();
    for chunk in (0..units).collect::<Vec<_>>().chunks(10_000) {
        let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = chunk
            .iter()
            .map(|i| {
                (
                    keys.clone(),
                    vec![
                        format!("r{i}").into_bytes(),
                        format!("u{i}").into_bytes(),
                        b"1".to_vec(),
                    ],
                )
            })
            .collect();
        for r in store.eval_each(&DEDUCT, &calls).await {
            assert!(
                matches!(r, Ok(redis::Value::Int(n)) if n >= 0),
                "a deduction of the sale failed: {r:?}"
            );
        }
    }
    let deducted = started.elapsed();
    let written: Vec<usize> = (0..units - held).collect();
    for chunk in written.chunks(5_000) {
        let orders: Vec<NewOrder> = chunk.iter().map(|&i| order(i)).collect();
        insert_with_outbox(db, &orders).await.expect("orders");
    }
    println!(
        "sale: {units} deductions in {:.1} s, {} orders in {:.1} s more ({held} held back)",
        deducted.as_secs_f64(),
        units - held,
        (started.elapsed() - deducted).as_secs_f64()
    );
    (units - held..units).map(order).collect()
}

/// A Redis handle on a standalone server.
pub async fn standalone(url: &str) -> RedisStore {
    store(RedisTarget::Standalone(SecretUrl::new(url))).await
}

/// A Redis handle on a cluster given its seeds.
pub async fn cluster(seeds: &str) -> RedisStore {
    store(RedisTarget::Cluster(
        seeds.split(',').map(SecretUrl::new).collect(),
    ))
    .await
}

pub async fn store(target: RedisTarget) -> RedisStore {
    RedisStore::connect(RedisSettings {
        target,
        connect_timeout: std::time::Duration::from_secs(2),
        response_timeout: std::time::Duration::from_secs(2),
        tls_ca: None,
        read_only: false,
    })
    .await
    .expect("connect to the test Redis")
}

/// The keys of one product under the live prefix.
pub fn product_keys(activity: &str, product: &str) -> seckill_console::redis::ProductKeys {
    seckill_console::redis::KeySpace::default().product(
        &seckill_console::domain::ActivityId::parse(activity).expect("valid activity"),
        &seckill_console::domain::ProductId::parse(product).expect("valid product"),
    )
}

/// One buyer as an app server does it: the Lua deduction, then on success the order and its
/// outbox message in one transaction.
pub async fn buy(
    store: &RedisStore,
    db: &Db,
    activity: &str,
    product: &str,
    request: &str,
    user: &str,
    quantity: i64,
) -> seckill_console::redis::stock::Deducted {
    use seckill_console::redis::stock::{Deducted, deduct};
    let k = product_keys(activity, product);
    let r = deduct(store, &k, request, user, &quantity.to_string())
        .await
        .expect("deduct");
    if let Deducted::Remaining(_) = r {
        let order = seckill_console::db::orders::NewOrder {
            order_id: format!("o-{request}"),
            request_id: request.to_string(),
            activity_id: activity.to_string(),
            product_id: product.to_string(),
            user_id: user.to_string(),
            quantity,
            status: seckill_console::domain::order::OrderStatus::PendingPayment,
        };
        seckill_console::db::orders::insert_with_outbox(db, &[order])
            .await
            .expect("order and outbox");
    }
    r
}

/// Runs a Redis command routed by its first key argument.
pub async fn redis_cmd(store: &RedisStore, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let route = args.get(1).copied().unwrap_or("");
    store.query(route, &c).await.expect("redis command")
}

/// Every entry of a product's ledger, read in HSCAN pages (the placeholder field skipped), and
/// the number of values that are not ledger records.
pub async fn ledger_entries(
    store: &RedisStore,
    keys: &seckill_console::redis::ProductKeys,
) -> (Vec<seckill_console::domain::stock::LedgerEntry>, usize) {
    use seckill_console::redis::ledger::scan_page;
    let mut all = std::collections::HashMap::new();
    let mut bad = std::collections::HashSet::new();
    let mut cursor = 0;
    loop {
        let page = scan_page(store, keys, cursor).await.expect("HSCAN ledger");
        for e in page.entries {
            all.insert(e.request_id.clone(), e);
        }
        bad.extend(page.corrupt.into_iter().map(|(rid, _)| rid));
        if page.next == 0 || page.wrong_type {
            return (all.into_values().collect(), bad.len());
        }
        cursor = page.next;
    }
}

/// The request ids of a product's live orders, read whole (a test's full recomputation).
pub async fn live_request_ids(
    db: &Db,
    activity: &str,
    product: &str,
) -> std::collections::HashSet<String> {
    let rows: Vec<(String,)> = db
        .fetch_all_as(
            "SELECT request_id FROM seckill_order WHERE activity_id = ? AND product_id = ? \
             AND status IN ('pending_payment', 'paid')",
            &[activity.into(), product.into()],
        )
        .await
        .expect("live orders");
    rows.into_iter().map(|(r,)| r).collect()
}

/// DUMP of every key of the activity: byte-for-byte state.
pub async fn dump_activity(store: &RedisStore, activity: &str) -> HashMap<String, redis::Value> {
    let a = ActivityId::parse(activity).expect("valid");
    let keys = store
        .scan(&KeySpace::default().activity_pattern(&a))
        .await
        .expect("scan");
    let items: Vec<Keyed> = keys
        .iter()
        .map(|k| Keyed::new(k.clone(), redis::cmd("DUMP").arg(k).clone()))
        .collect();
    let dumps = store.pipeline(items).await;
    keys.into_iter()
        .zip(dumps)
        .map(|(k, v)| (k, v.expect("DUMP")))
        .collect()
}

/// Rows of the audit trail, over every activity.
pub async fn audit_rows(db: &Db) -> i64 {
    let rows: Vec<(i64,)> = db
        .fetch_all_as("SELECT COUNT(*) FROM seckill_audit", &[])
        .await
        .expect("count");
    rows[0].0
}

/// `INFO commandstats` summed over every primary: per command (lower case), its calls and
/// microseconds since the last `CONFIG RESETSTAT`.
pub async fn commandstats(store: &RedisStore) -> HashMap<String, (u64, u64)> {
    let mut out: HashMap<String, (u64, u64)> = HashMap::new();
    let info = redis::cmd("INFO").arg("commandstats").clone();
    for (_, reply) in store.on_nodes(&store.primaries(), &info).await {
        let Ok(redis::Value::BulkString(b)) = reply else {
            continue;
        };
        for line in String::from_utf8_lossy(&b).lines() {
            let Some((name, rest)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let field = |key: &str| -> u64 {
                rest.split(',')
                    .find_map(|kv| kv.strip_prefix(key))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            let e = out.entry(name.to_string()).or_default();
            e.0 += field("calls=");
            e.1 += field("usec=");
        }
    }
    out
}
