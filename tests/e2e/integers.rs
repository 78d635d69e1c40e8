//! Redis's integer rule in every script and in the console (issue 11): a value INCRBY or
//! HINCRBY would refuse (`01`, `00`, `-0`, `+5`, ` 5`, `5 `, `0x5`, `1e3`, 17 digits) in the
//! stock, a meta field a script reads, the buyers hash or the ledger makes every script that
//! reads it answer an error with nothing written; `status` calls a stock or meta field like
//! that `corrupt`, and `fix` rewrites such a stock from the truth. On standalone and cluster.

use crate::harness::fixtures::{buy, product_keys, redis_cmd};
use crate::harness::{Console, TestDb, Topo};
use redis::Value;
use seckill_console::redis::rewrite::{
    RecordMode, Recorded, Rewrite, StockWrite, record, set_stock_many,
};
use seckill_console::redis::stock::{deduct, restore};
use seckill_console::redis::{ProductKeys, RedisStore};

/// Values Redis's INCRBY refuses although a looser rule would read them as integers.
const NOT_INTEGERS: [&str; 9] = [
    "01",
    "00",
    "-0",
    "+5",
    " 5",
    "5 ",
    "0x5",
    "1e3",
    "12345678901234567",
];

/// Where a bad value goes, and which scripts read it there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Stock,
    Limit,
    Paused,
    Deducted,
    Returned,
    Holding,
    Ledger,
}

const PLACES: [Place; 7] = [
    Place::Stock,
    Place::Limit,
    Place::Paused,
    Place::Deducted,
    Place::Returned,
    Place::Holding,
    Place::Ledger,
];

async fn dump(store: &RedisStore, k: &ProductKeys) -> Vec<Value> {
    let mut out = Vec::new();
    for key in k.script_keys() {
        out.push(redis_cmd(store, &["DUMP", key]).await);
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Writes `bad` into `place`; returns the command that puts the good value back.
async fn spoil(store: &RedisStore, k: &ProductKeys, place: Place, bad: &str) -> Vec<String> {
    let (key, field) = match place {
        Place::Stock => (k.stock.as_str(), None),
        Place::Limit => (k.meta.as_str(), Some("limit")),
        Place::Paused => (k.meta.as_str(), Some("paused")),
        Place::Deducted => (k.meta.as_str(), Some("deducted")),
        Place::Returned => (k.meta.as_str(), Some("returned")),
        Place::Holding => (k.buyers.as_str(), Some("u1")),
        Place::Ledger => (k.ledger.as_str(), Some("h1")),
    };
    let mend: Vec<String> = match field {
        None => {
            let v = text(&redis_cmd(store, &["GET", key]).await);
            vec!["SET".into(), key.into(), v]
        }
        Some(f) => match redis_cmd(store, &["HGET", key, f]).await {
            Value::Nil => vec!["HDEL".into(), key.into(), f.into()],
            v => vec!["HSET".into(), key.into(), f.into(), text(&v)],
        },
    };
    match (place, field) {
        (Place::Ledger, Some(f)) => {
            // The entry's units field: `d|<units>|<event>|<result>|<user>`.
            let entry = text(&redis_cmd(store, &["HGET", key, f]).await);
            let mut parts: Vec<&str> = entry.splitn(5, '|').collect();
            assert_eq!(parts.len(), 5, "ledger entry {entry}");
            parts[1] = bad;
            redis_cmd(store, &["HSET", key, f, &parts.join("|")]).await;
        }
        (_, Some(f)) => {
            redis_cmd(store, &["HSET", key, f, bad]).await;
        }
        (_, None) => {
            redis_cmd(store, &["SET", key, bad, "KEEPTTL"]).await;
        }
    }
    mend
}

/// The name an error gives the field at `place`.
fn field_name(place: Place) -> &'static str {
    match place {
        Place::Stock => "stock",
        Place::Limit => "limit",
        Place::Paused => "paused",
        Place::Deducted => "deducted",
        Place::Returned => "returned",
        Place::Holding => "holding of user u1",
        Place::Ledger => "ledger entry of request h1",
    }
}

/// The error must name the field and show the value that stopped the script.
fn assert_names<T: std::fmt::Debug>(
    r: &Result<T, redis::RedisError>,
    place: Place,
    bad: &str,
    what: &str,
) {
    let e = match r {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{what}: answered {v:?}, not an error"),
    };
    assert!(
        e.contains(field_name(place)),
        "{what}: the error does not name the field: {e}"
    );
    assert!(
        e.contains(bad),
        "{what}: the error does not show the value {bad:?}: {e}"
    );
}

/// Every script that reads `place`, run once: each must fail, naming the field and its value
/// (or, for `record.lua absorb` on a stock that is not an integer, answer that the stock
/// moved), and nothing may change.
async fn every_script_refuses(
    store: &RedisStore,
    k: &ProductKeys,
    (place, bad): (Place, &str),
    label: &str,
) {
    let before = dump(store, k).await;
    let reads = |p: &[Place]| p.contains(&place);
    if reads(&[
        Place::Stock,
        Place::Limit,
        Place::Paused,
        Place::Deducted,
        Place::Holding,
    ]) {
        let r = deduct(store, k, "n1", "u1", "1").await;
        assert_names(&r, place, bad, &format!("{label}: deduct"));
    }
    if reads(&[Place::Ledger]) {
        let r = deduct(store, k, "h1", "u1", "1").await;
        assert_names(&r, place, bad, &format!("{label}: the retry of h1"));
    }
    if reads(&[Place::Stock, Place::Returned, Place::Holding, Place::Ledger]) {
        let r = restore(store, k, "h1").await;
        assert_names(&r, place, bad, &format!("{label}: restore"));
    }
    // The console's writes carry the meta rev they read: the current one, so that what stops
    // them is the value, not a stale read.
    let rev = match redis_cmd(store, &["HGET", &k.meta, "rev"]).await {
        Value::BulkString(b) => b,
        _ => Vec::new(),
    };
    if reads(&[Place::Stock, Place::Deducted, Place::Holding]) {
        let r = record(
            store,
            k,
            RecordMode::Absorb {
                rev: rev.clone(),
                claim: true,
            },
            None,
            &[("lost1".into(), "u1".into(), 1)],
        )
        .await;
        assert!(
            matches!(r, Err(_) | Ok(Recorded::StockMoved(_))),
            "{label}: record absorb answered {r:?}"
        );
    }
    if reads(&[Place::Stock, Place::Deducted, Place::Returned]) {
        let w = StockWrite {
            keys: k,
            rewrite: Rewrite::Rebase {
                initial: 10,
                offset: 0,
                release: 0,
            },
            reset_meta: false,
            expire_at: None,
            rev,
            token: None,
            meta: vec![],
        };
        let r = set_stock_many(store, &[w]).await.pop().expect("a reply");
        assert!(r.is_err(), "{label}: set_stock rebase answered {r:?}");
    }
    assert_eq!(dump(store, k).await, before, "{label}: a script wrote");
}

#[tokio::test]
async fn values_redis_would_refuse_stop_every_script_before_its_first_write() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        c.import_preheat(&lib, "ints", &[("p1", 10, 5)]).await;
        let k = product_keys("ints", "p1");
        // History, so that every key exists: h1 deducted and returned once, h2 deducted.
        assert!(deduct(&store, &k, "h0", "u1", "1").await.is_ok());
        assert!(restore(&store, &k, "h0").await.is_ok());
        assert!(deduct(&store, &k, "h1", "u1", "1").await.is_ok());
        for place in PLACES {
            for bad in NOT_INTEGERS {
                let label = format!("{} {place:?} = {bad:?}", topo.name());
                let mend = spoil(&store, &k, place, bad).await;
                every_script_refuses(&store, &k, (place, bad), &label).await;
                let doc = c.run("--json status ints").json();
                let p = &doc["products"][0];
                assert_eq!(p["state"], "corrupt", "{label}: {p}");
                // A holding or ledger entry is named (the sweep of both hashes found it).
                let named = match place {
                    Place::Holding => "holding of user u1",
                    Place::Ledger => "ledger entry of request h1",
                    _ => "",
                };
                assert!(
                    p["corrupt_value"]
                        .as_str()
                        .is_some_and(|v| v.contains(named)),
                    "{label}: {p}"
                );
                if place == Place::Stock {
                    // Either repair rewrites it from the truth: 10 units, one held by h1.
                    c.ok(if bad.len() % 2 == 0 {
                        "--json fix ints --yes"
                    } else {
                        "--json preheat ints --force"
                    });
                    let now = text(&redis_cmd(&store, &["GET", &k.stock]).await);
                    assert_eq!(now, "9", "{label}: after the fix");
                    let doc = c.run("--json status ints").json();
                    assert_ne!(doc["products"][0]["state"], "corrupt", "{label}");
                } else {
                    let m: Vec<&str> = mend.iter().map(String::as_str).collect();
                    redis_cmd(&store, &m).await;
                }
            }
        }
        // The books still hold: h1 deducted, h0 returned, 9 left, and sales go on.
        assert_eq!(text(&redis_cmd(&store, &["GET", &k.stock]).await), "9");
        assert_eq!(
            deduct(&store, &k, "h2", "u2", "1").await.expect("a sale"),
            seckill_console::redis::stock::Deducted::Remaining(8)
        );
        lib.close().await;
    }
}

/// One unreadable entry in a big ledger or buyers hash: the sweep finds it within a few
/// reads, `status` calls the product corrupt naming the entry, the scripts refuse that request
/// or buyer with nothing written while others buy on, and `fix` says what it cannot rebuild
/// (exit 4, Redis untouched) instead of claiming success. Once set right, it clears.
#[tokio::test]
async fn an_unreadable_ledger_entry_or_holding_is_found_named_and_left_to_the_operator() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        c.import_preheat(&lib, "entries", &[("p1", 5000, 5)]).await;
        let k = product_keys("entries", "p1");
        // More entries than one sweep page holds (a hashtable, not a listpack).
        for i in 0..400 {
            buy(
                &store,
                &lib,
                "entries",
                "p1",
                &format!("r{i}"),
                &format!("u{i}"),
                1,
            )
            .await;
        }
        for (key, field, named) in [
            (k.ledger.clone(), "r300", "ledger entry of request r300"),
            (k.buyers.clone(), "u350", "holding of user u350"),
        ] {
            let label = format!("{} {named}", topo.name());
            let good = text(&redis_cmd(&store, &["HGET", &key, field]).await);
            redis_cmd(&store, &["HSET", &key, field, "garbage"]).await;
            let before = dump(&store, &k).await;
            let (rid, user) = if field.starts_with('r') {
                (field, "u300")
            } else {
                ("again350", field)
            };
            assert!(deduct(&store, &k, rid, user, "1").await.is_err(), "{label}");
            assert_eq!(dump(&store, &k).await, before, "{label}: a script wrote");
            assert!(deduct(&store, &k, "other", "u-other", "1").await.is_ok());
            let mut found = None;
            for _ in 0..60 {
                let doc = c.run("--json status entries").json();
                if doc["products"][0]["state"] == "corrupt" {
                    found = Some(doc);
                    break;
                }
            }
            let doc = found.unwrap_or_else(|| panic!("{label}: never found"));
            let alert = doc["alerts"]
                .as_array()
                .and_then(|a| a.iter().find(|a| a["kind"] == "corrupt"))
                .unwrap_or_else(|| panic!("{label}: no corrupt alert: {doc}"));
            assert!(
                alert["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(named) && m.contains(&key)),
                "{label}: {alert}"
            );
            let stock = text(&redis_cmd(&store, &["GET", &k.stock]).await);
            let f = c.run("--json fix entries --yes");
            f.expect_code(4);
            let row = &f.json()["products"][0];
            assert!(
                row["error"]
                    .as_str()
                    .is_some_and(|e| e.contains(named) && e.contains("cannot rebuild")),
                "{label}: {row}"
            );
            assert_eq!(text(&redis_cmd(&store, &["GET", &k.stock]).await), stock);
            // Set right by hand: the next status no longer names it.
            redis_cmd(&store, &["HSET", &key, field, &good]).await;
            let doc = c.run("--json status entries").json();
            assert_eq!(doc["products"][0]["state"], "ok", "{label}: {doc}");
            // The request that was deducted during the check has no order: undo it so the
            // next round starts balanced.
            assert!(restore(&store, &k, "other").await.is_ok());
        }
        lib.close().await;
    }
}

/// A buyers or ledger key of another type makes every deduction fail: `status` says so,
/// naming the key, and `fix` says what it cannot repair instead of "nothing to do".
#[tokio::test]
async fn a_buyers_or_ledger_key_of_another_type_is_corrupt() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        c.import_preheat(&lib, "types", &[("p1", 10, 5)]).await;
        let k = product_keys("types", "p1");
        for (what, key) in [("buyers", k.buyers.clone()), ("ledger", k.ledger.clone())] {
            let label = format!("{} {what}", topo.name());
            let saved = redis_cmd(&store, &["DUMP", &key]).await;
            redis_cmd(&store, &["DEL", &key]).await;
            redis_cmd(&store, &["SET", &key, "x"]).await;
            assert!(
                deduct(&store, &k, "n1", "u1", "1").await.is_err(),
                "{label}"
            );
            let doc = c.run("--json status types").json();
            assert_eq!(doc["products"][0]["state"], "corrupt", "{label}: {doc}");
            let named = doc["alerts"]
                .as_array()
                .expect("alerts")
                .iter()
                .any(|a| a["message"].as_str().is_some_and(|m| m.contains(&key)));
            assert!(named, "{label}: no alert names {key}: {doc}");
            let f = c.run("--json fix types --yes");
            assert_ne!(f.code, 0, "{label}: fix claimed success: {}", f.stdout);
            // Put it back as it was.
            redis_cmd(&store, &["DEL", &key]).await;
            if let Value::BulkString(b) = saved {
                let mut c = redis::cmd("RESTORE");
                c.arg(&key).arg(0).arg(b);
                store.query(&key, &c).await.expect("restore");
            }
            let doc = c.run("--json status types").json();
            assert_eq!(doc["products"][0]["state"], "ok", "{label}");
        }
        lib.close().await;
    }
}

/// A fix that rebuilds a corrupt meta hash keeps what it does not own: a paused product stays
/// paused, and the gateways keep the preheat epoch and the token bucket; a `paused` that is
/// neither 0 nor 1 takes the database's word.
#[tokio::test]
async fn rebuilding_a_corrupt_meta_hash_keeps_paused_epoch_and_bucket() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "keep", &[("p1", 1000, 5)]).await;
    let k = product_keys("keep", "p1");
    let field = |f: &'static str| {
        let store = &store;
        let meta = k.meta.clone();
        async move { text(&redis_cmd(store, &["HGET", &meta, f]).await) }
    };
    let (epoch, cap, rate) = (
        field("epoch").await,
        field("bucket_capacity").await,
        field("bucket_rate").await,
    );
    assert!(
        !epoch.is_empty() && epoch != "Nil",
        "preheat wrote an epoch"
    );
    // A readable pause nobody recorded stays (a repair never puts a paused product back on
    // sale); "01" is nobody's pause (no console writes it) and takes the database's word.
    for (paused, after) in [("1", "1"), ("01", "0")] {
        redis_cmd(
            &store,
            &["HSET", &k.meta, "paused", paused, "deducted", "00"],
        )
        .await;
        let doc = c.run("--json status keep").json();
        assert_eq!(doc["products"][0]["state"], "corrupt");
        c.ok("--json fix keep --yes");
        assert_eq!(field("paused").await, after, "paused {paused:?}");
        assert_eq!(field("deducted").await, "0");
        assert_eq!(field("epoch").await, epoch);
        assert_eq!(field("bucket_capacity").await, cap);
        assert_eq!(field("bucket_rate").await, rate);
        let sold = deduct(&store, &k, &format!("r-{paused}"), "u1", "1")
            .await
            .expect("deduct");
        if after == "1" {
            assert_eq!(sold, seckill_console::redis::stock::Deducted::Paused);
        } else {
            assert!(
                matches!(sold, seckill_console::redis::stock::Deducted::Remaining(_)),
                "{sold:?}"
            );
        }
    }
    lib.close().await;
}
