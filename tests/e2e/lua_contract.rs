//! The Lua contract of `deduct.lua` and `restore.lua`, on a standalone server and a cluster.

use crate::harness::Topo;
use redis::Value;
use seckill_console::domain::{ActivityId, ProductId};
use seckill_console::redis::stock::{Deducted, Restored, deduct, restore};
use seckill_console::redis::{KeySpace, ProductKeys, RedisStore};

fn keys(a: &str, p: &str) -> ProductKeys {
    KeySpace::default().product(
        &ActivityId::parse(a).expect("valid"),
        &ProductId::parse(p).expect("valid"),
    )
}

async fn cmd(store: &RedisStore, key: &str, args: &[&str]) -> Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    store.query(key, &c).await.expect("redis command")
}

/// Sets a product up the way preheat does: stock, a per-user limit, and the buyers and ledger
/// hashes and the event stream, which the scripts need to exist.
async fn setup(store: &RedisStore, k: &ProductKeys, stock: &str, limit: &str) {
    cmd(store, &k.stock, &["SET", &k.stock, stock]).await;
    cmd(
        store,
        &k.meta,
        &["HSET", &k.meta, "initial", stock, "limit", limit],
    )
    .await;
    cmd(store, &k.buyers, &["HSET", &k.buyers, "", "0"]).await;
    cmd(store, &k.ledger, &["HSET", &k.ledger, "", "-"]).await;
    cmd(store, &k.events, &["XADD", &k.events, "*", "a", "0|"]).await;
}

/// DUMP of every key of the product: byte-for-byte state.
async fn snapshot(store: &RedisStore, k: &ProductKeys) -> Vec<Value> {
    let mut out = Vec::new();
    for key in k.script_keys() {
        out.push(cmd(store, key, &["DUMP", key]).await);
    }
    out
}

async fn stock_of(store: &RedisStore, k: &ProductKeys) -> String {
    match cmd(store, &k.stock, &["GET", &k.stock]).await {
        Value::BulkString(b) => String::from_utf8(b).expect("utf8"),
        other => panic!("stock is {other:?}"),
    }
}

#[tokio::test]
async fn return_codes_limits_and_idempotency() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let k = keys("lua", "p1");
        let name = topo.name();

        assert_eq!(
            deduct(&store, &k, "r0", "u0", "1").await.expect("ok"),
            Deducted::Missing,
            "{name}"
        );

        setup(&store, &k, "5", "2").await;
        assert_eq!(
            deduct(&store, &k, "r1", "u1", "1").await.expect("ok"),
            Deducted::Remaining(4)
        );
        assert_eq!(
            deduct(&store, &k, "r2", "u1", "1").await.expect("ok"),
            Deducted::Remaining(3)
        );
        // The per-user limit of 2 lets u1 buy twice and not three times.
        assert_eq!(
            deduct(&store, &k, "r3", "u1", "1").await.expect("ok"),
            Deducted::UserLimit
        );
        assert_eq!(
            deduct(&store, &k, "r4", "u2", "3").await.expect("ok"),
            Deducted::UserLimit
        );

        // A retry of a request id that succeeded returns its first result and changes nothing.
        let before = snapshot(&store, &k).await;
        assert_eq!(
            deduct(&store, &k, "r1", "u1", "1").await.expect("ok"),
            Deducted::Remaining(4)
        );
        assert_eq!(
            deduct(&store, &k, "r1", "other", "2").await.expect("ok"),
            Deducted::Remaining(4)
        );
        assert_eq!(
            snapshot(&store, &k).await,
            before,
            "{name}: a retry changed state"
        );

        // Bad arguments.
        for q in ["0", "-1", "x", "", "1.5", "01", "99999999999"] {
            assert_eq!(
                deduct(&store, &k, "rq", "u3", q).await.expect("ok"),
                Deducted::BadArgs,
                "{name} q={q:?}"
            );
        }
        assert_eq!(
            deduct(&store, &k, "", "u3", "1").await.expect("ok"),
            Deducted::BadArgs
        );
        assert_eq!(
            deduct(&store, &k, "rx", "", "1").await.expect("ok"),
            Deducted::BadArgs
        );
        assert_eq!(
            snapshot(&store, &k).await,
            before,
            "{name}: bad args changed state"
        );

        // Sold out: 3 left, u3 and u4 take 2 + 1, then nothing is left for u5.
        assert_eq!(
            deduct(&store, &k, "r5", "u3", "2").await.expect("ok"),
            Deducted::Remaining(1)
        );
        assert_eq!(
            deduct(&store, &k, "r6", "u4", "2").await.expect("ok"),
            Deducted::SoldOut
        );
        assert_eq!(
            deduct(&store, &k, "r7", "u4", "1").await.expect("ok"),
            Deducted::Remaining(0)
        );
        assert_eq!(
            deduct(&store, &k, "r8", "u5", "1").await.expect("ok"),
            Deducted::SoldOut
        );
        assert_eq!(stock_of(&store, &k).await, "0");

        // Paused.
        let k2 = keys("lua", "p2");
        setup(&store, &k2, "10", "1").await;
        cmd(&store, &k2.meta, &["HSET", &k2.meta, "paused", "1"]).await;
        assert_eq!(
            deduct(&store, &k2, "r1", "u1", "1").await.expect("ok"),
            Deducted::Paused
        );
        cmd(&store, &k2.meta, &["HSET", &k2.meta, "paused", "0"]).await;
        assert_eq!(
            deduct(&store, &k2, "r1", "u1", "1").await.expect("ok"),
            Deducted::Remaining(9)
        );

        // The ledger holds exactly the successful request ids, in the product's slot, beside
        // its placeholder (an empty request id, which every script refuses).
        let ledger = cmd(&store, &k.ledger, &["HKEYS", &k.ledger]).await;
        let mut ids: Vec<String> = redis::from_redis_value(ledger).expect("keys");
        ids.sort();
        assert_eq!(ids, vec!["", "r1", "r2", "r5", "r7"], "{name}");
    }
}

#[tokio::test]
async fn corrupt_values_are_error_replies_that_write_nothing() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let name = topo.name();
        let corrupt_stock: [(&str, &str); 3] = [("abc", "abc"), ("dec", "1.5"), ("empty", "")];
        for (pid, value) in corrupt_stock {
            let k = keys("bad", pid);
            setup(&store, &k, "5", "2").await;
            // Some history, so every key exists and must stay byte-for-byte the same.
            assert!(matches!(
                deduct(&store, &k, "h1", "u1", "1").await,
                Ok(Deducted::Remaining(4))
            ));
            cmd(&store, &k.stock, &["SET", &k.stock, value]).await;
            let before = snapshot(&store, &k).await;
            let err = deduct(&store, &k, "n1", "u2", "1")
                .await
                .expect_err("corrupt stock must fail");
            assert!(err.to_string().contains("not an integer"), "{name}: {err}");
            assert!(
                restore(&store, &k, "h1").await.is_err(),
                "{name}: restore on corrupt stock"
            );
            assert_eq!(
                snapshot(&store, &k).await,
                before,
                "{name}: {pid} changed state"
            );
        }

        // A stock key of the wrong type.
        let k = keys("bad", "wrongtype");
        setup(&store, &k, "5", "2").await;
        assert!(matches!(
            deduct(&store, &k, "h1", "u1", "1").await,
            Ok(Deducted::Remaining(4))
        ));
        cmd(&store, &k.stock, &["DEL", &k.stock]).await;
        cmd(&store, &k.stock, &["RPUSH", &k.stock, "5"]).await;
        let before = snapshot(&store, &k).await;
        let err = deduct(&store, &k, "n1", "u2", "1")
            .await
            .expect_err("wrong type must fail");
        assert!(err.to_string().contains("WRONGTYPE"), "{name}: {err}");
        assert_eq!(
            snapshot(&store, &k).await,
            before,
            "{name}: wrong type changed state"
        );

        // Every other key of the product with a wrong type or a corrupt field.
        let k = keys("bad", "others");
        setup(&store, &k, "5", "3").await;
        assert!(matches!(
            deduct(&store, &k, "h1", "u1", "1").await,
            Ok(Deducted::Remaining(4))
        ));
        let cases: Vec<(&str, Vec<&str>, Vec<&str>)> = vec![
            (
                "limit",
                vec!["HSET", &k.meta, "limit", "two"],
                vec!["HSET", &k.meta, "limit", "3"],
            ),
            (
                "deducted",
                vec!["HSET", &k.meta, "deducted", "x"],
                vec!["HSET", &k.meta, "deducted", "1"],
            ),
            (
                "holding",
                vec!["HSET", &k.buyers, "u1", "lots"],
                vec!["HSET", &k.buyers, "u1", "1"],
            ),
        ];
        for (what, break_it, mend_it) in cases {
            cmd(&store, &k.stock, &break_it).await;
            let before = snapshot(&store, &k).await;
            assert!(
                deduct(&store, &k, "n2", "u1", "1").await.is_err(),
                "{name}: corrupt {what}"
            );
            assert_eq!(
                snapshot(&store, &k).await,
                before,
                "{name}: corrupt {what} changed state"
            );
            cmd(&store, &k.stock, &mend_it).await;
        }
        cmd(&store, &k.ledger, &["HSET", &k.ledger, "h1", "garbage"]).await;
        let before = snapshot(&store, &k).await;
        assert!(
            deduct(&store, &k, "h1", "u1", "1").await.is_err(),
            "{name}: corrupt ledger entry"
        );
        assert!(
            restore(&store, &k, "h1").await.is_err(),
            "{name}: corrupt ledger entry on restore"
        );
        assert_eq!(snapshot(&store, &k).await, before);
    }
}

#[tokio::test]
async fn restore_returns_stock_once_and_ignores_unknown_requests() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let name = topo.name();
        let k = keys("rst", "p1");
        setup(&store, &k, "10", "5").await;
        assert_eq!(
            deduct(&store, &k, "r1", "u1", "3").await.expect("ok"),
            Deducted::Remaining(7)
        );
        assert_eq!(
            restore(&store, &k, "r1").await.expect("ok"),
            Restored::Returned(3),
            "{name}"
        );
        assert_eq!(stock_of(&store, &k).await, "10");
        let before = snapshot(&store, &k).await;
        assert_eq!(
            restore(&store, &k, "r1").await.expect("ok"),
            Restored::AlreadyReturned,
            "{name}"
        );
        assert_eq!(
            restore(&store, &k, "nope").await.expect("ok"),
            Restored::Unknown,
            "{name}"
        );
        assert_eq!(
            restore(&store, &k, "").await.expect("ok"),
            Restored::BadArgs
        );
        assert_eq!(
            snapshot(&store, &k).await,
            before,
            "{name}: a repeated or unknown restore changed state"
        );
        // The user's holding went back too, so the limit counts only what they keep.
        let held = cmd(&store, &k.buyers, &["HGET", &k.buyers, "u1"]).await;
        assert_eq!(held, Value::Nil);
        // A retry of the returned request sells nothing again: its units are back on sale,
        // and a replayed "sold" would make the shop write an order for them (-7).
        assert_eq!(
            deduct(&store, &k, "r1", "u1", "3").await.expect("ok"),
            Deducted::Returned
        );
        assert_eq!(stock_of(&store, &k).await, "10");
        // A missing stock key is never invented by a restore.
        assert_eq!(
            deduct(&store, &k, "r2", "u1", "1").await.expect("ok"),
            Deducted::Remaining(9)
        );
        cmd(&store, &k.stock, &["DEL", &k.stock]).await;
        assert_eq!(
            restore(&store, &k, "r2").await.expect("ok"),
            Restored::Missing
        );
        assert_eq!(
            cmd(&store, &k.stock, &["EXISTS", &k.stock]).await,
            Value::Int(0)
        );
    }
}

/// Every value the console's scripts read, increment or pass on is checked before their first
/// write (issue 19): a 20-digit expiry, an `initial:` of 21 digits, counters that are not
/// integers under a `set` that keeps the meta hash: each is refused with nothing written.
#[tokio::test]
async fn the_console_scripts_check_every_value_before_their_first_write() {
    use seckill_console::redis::scripts::{RECORD, SET_STOCK};
    for topo in Topo::both() {
        let store = topo.store().await;
        let name = topo.name();
        let k = keys("lua", "half");
        setup(&store, &k, "10", "2").await;
        cmd(
            &store,
            &k.meta,
            &["HSET", &k.meta, "deducted", "0", "returned", "0"],
        )
        .await;
        let keys5 = k.script_keys();
        let before = snapshot(&store, &k).await;
        let huge = "99999999999999999999";
        // set_stock: rebase with a 20-digit expiry; a set from a 21-digit initial.
        for args in [
            vec!["rebase", "10", "0", "keep", huge, "", "", "0"],
            vec![
                "set",
                "initial:100000000000000000000",
                "=10",
                "keep",
                "",
                "",
                "",
                "0",
            ],
            vec!["set", "5", "=10", "keep", "", "", "", "0", "limit", "0"],
            vec!["rebase", "10", "0", "keep", "", "", "", "-1"],
        ] {
            let r = store.eval(&SET_STOCK, &keys5, &args).await;
            assert!(
                matches!(r, Ok(Value::Int(-4))),
                "{name}: set_stock {args:?} answered {r:?}"
            );
            assert_eq!(snapshot(&store, &k).await, before, "{name}: {args:?} wrote");
        }
        // record: a 20-digit expiry.
        let r = store
            .eval(&RECORD, &keys5, &["absorb", huge, "", "", "r1", "u1", "1"])
            .await;
        assert!(
            matches!(r, Ok(Value::Int(-4))),
            "{name}: record answered {r:?}"
        );
        assert_eq!(snapshot(&store, &k).await, before, "{name}: record wrote");
        // A corrupt counter under a 'set' that keeps the meta hash: an error reply, and the
        // stock key (which a set of a corrupt stock would replace) is still there.
        cmd(&store, &k.stock, &["SET", &k.stock, "abc"]).await;
        cmd(&store, &k.meta, &["HSET", &k.meta, "deducted", "abc"]).await;
        let spoiled = snapshot(&store, &k).await;
        let r = store
            .eval(
                &SET_STOCK,
                &keys5,
                &["set", "initial:10", "=abc", "keep", "", "", "", "0"],
            )
            .await;
        assert!(
            r.is_err(),
            "{name}: set over corrupt counters answered {r:?}"
        );
        assert_eq!(snapshot(&store, &k).await, spoiled, "{name}: a half write");
        // A stale rev is a conflict, nothing written.
        cmd(&store, &k.stock, &["SET", &k.stock, "10"]).await;
        cmd(
            &store,
            &k.meta,
            &["HSET", &k.meta, "deducted", "0", "rev", "4"],
        )
        .await;
        let now = snapshot(&store, &k).await;
        let r = store
            .eval(
                &SET_STOCK,
                &keys5,
                &["rebase", "10", "0", "keep", "", "3", "", "0"],
            )
            .await;
        assert!(
            matches!(&r, Ok(Value::Array(v)) if v.first() == Some(&Value::Int(2))),
            "{name}: a stale rev answered {r:?}"
        );
        assert_eq!(snapshot(&store, &k).await, now, "{name}: a stale rev wrote");
    }
}

/// A rebuild's hold (issue 19): `freeze.lua` takes the stock key away and marks the holder;
/// while it holds, the deduction answers -1, another console's freeze is refused, and only
/// the holder's `holdings.lua` and `set_stock.lua` write; the set ends the hold with the
/// witnesses the scripts check.
#[tokio::test]
async fn a_hold_stops_every_other_writer_until_its_set() {
    use seckill_console::redis::rewrite::{
        Frozen, Held, NewStock, Rewrite, SetStock, StockWrite, freeze_many, set_stock_many,
        write_holdings,
    };
    for topo in Topo::both() {
        let store = topo.store().await;
        let name = topo.name();
        let k = keys("lua", "hold");
        setup(&store, &k, "10", "2").await;
        assert_eq!(
            deduct(&store, &k, "r1", "u1", "1").await.expect("ok"),
            Deducted::Remaining(9)
        );
        let asks = [(&k, b"=9".to_vec(), Vec::new())];
        let held = freeze_many(&store, "tokA", &asks).await;
        assert!(
            matches!(held.first(), Some(Ok(Frozen::Held { rev: 1 }))),
            "{name}: {held:?}"
        );
        assert_eq!(
            cmd(&store, &k.stock, &["EXISTS", &k.stock]).await,
            Value::Int(0)
        );
        assert_eq!(
            deduct(&store, &k, "r2", "u2", "1").await.expect("ok"),
            Deducted::Missing
        );
        // Another console: refused while the hold is young.
        let other = freeze_many(&store, "tokB", &[(&k, b"!".to_vec(), b"1".to_vec())]).await;
        assert!(
            matches!(other.first(), Some(Ok(Frozen::Busy(Held::Frozen(_))))),
            "{name}: {other:?}"
        );
        let wrong = write_holdings(&store, &k, "tokB", &[(b"u1".to_vec(), 5)])
            .await
            .expect("reply");
        assert!(matches!(wrong, Err(Held::Frozen(_))), "{name}: {wrong:?}");
        let ok = write_holdings(&store, &k, "tokA", &[(b"u1".to_vec(), 1)])
            .await
            .expect("reply");
        assert_eq!(ok, Ok(1), "{name}");
        let end = StockWrite {
            keys: &k,
            rewrite: Rewrite::Set {
                guard: b"!".to_vec(),
                stock: NewStock::FromCounters { initial: 10 },
            },
            reset_meta: false,
            expire_at: None,
            rev: b"1".to_vec(),
            token: Some("tokA".into()),
            meta: vec![
                ("initial", "10".into()),
                ("limit", "2".into()),
                ("deducted", "1".into()),
                ("returned", "0".into()),
            ],
        };
        let done = set_stock_many(&store, &[end]).await;
        assert!(
            matches!(done.first(), Some(Ok(SetStock::Applied { stock: 9, .. }))),
            "{name}: {done:?}"
        );
        assert_eq!(
            cmd(&store, &k.meta, &["HEXISTS", &k.meta, "frozen"]).await,
            Value::Int(0)
        );
        assert_eq!(
            deduct(&store, &k, "r2", "u2", "1").await.expect("ok"),
            Deducted::Remaining(8)
        );
    }
}
