//! Dry runs: the buyers on a shadow copy of an activity — its own key prefix, a temporary SQLite
//! database — with the invariants checked afterwards and the shadow keys removed. Nothing live
//! is touched: the live prefix is refused, and the live database is only read.

use super::demand::{Demand, mix};
use super::run::{LoadSpec, run_load};
use super::stats::{Invariant, Live, RunStats};
use super::strategy::SQL_TABLES;
use super::{Faults, Strategy};
use crate::db::{Arg, Db, DbOptions, activity as activities, migrate, orders};
use crate::domain::activity::{Activity, ActivityDef};
use crate::domain::zone::Zone;
use crate::domain::{ActivityId, Product};
use crate::error::{Error, Result};
use crate::ops::cleanup::{CleanupOptions, cleanup};
use crate::ops::preheat::{PreheatOptions, preheat};
use crate::ops::progress::Silent;
use crate::redact::SecretUrl;
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use crate::redis::{cut, ledger};
use chrono::Utc;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What to rehearse.
#[derive(Clone, Debug)]
pub struct DryRunSpec {
    pub activity: ActivityId,
    pub buyers: usize,
    pub concurrency: usize,
    pub repeat_share: f64,
    pub strategies: Vec<Strategy>,
    pub faults: Faults,
    pub rate: Option<f64>,
    pub seed: u64,
    /// Shadow key prefix (default: `<live prefix>-dry-<run id>`); each strategy appends its name.
    pub shadow_prefix: Option<String>,
}

/// A temporary directory removed when dropped, whatever happened in between.
struct TempDir(PathBuf);

impl TempDir {
    fn new(run: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("seckill-dry-run-{run}"));
        std::fs::create_dir_all(&dir).map_err(|e| {
            Error::unavailable(format!(
                "cannot create the dry run's directory '{}': {e}",
                dir.display()
            ))
        })?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Hands each strategy's live counters to the caller (progress line, TUI chart).
pub type Observer<'a> = &'a (dyn Fn(Strategy, Arc<Live>) + Sync);

/// Runs every strategy of `spec` on its own shadow copy, with the same demand.
pub async fn dry_run(
    redis: &RedisStore,
    live_db: &Db,
    live_keys: &KeySpace,
    spec: &DryRunSpec,
    observer: Observer<'_>,
    stop: Arc<AtomicBool>,
) -> Result<Vec<RunStats>> {
    if redis.read_only() {
        return Err(Error::refused(
            "read-only mode: a dry run writes shadow keys; run without --read-only",
        ));
    }
    if spec.buyers == 0 {
        return Err(Error::bad_input(
            "a dry run needs at least one buyer (--buyers)",
        ));
    }
    let source = activities::require(live_db, &spec.activity).await?;
    let products = activities::products(live_db, &spec.activity).await?;
    if products.is_empty() {
        return Err(Error::bad_input(format!(
            "activity '{}' has no products",
            spec.activity
        )));
    }
    // A product paused live is paused in the copy too: a dry run shows what the sale would do.
    let live_pkeys: Vec<_> = products
        .iter()
        .map(|p| live_keys.product(&spec.activity, &p.product_id))
        .collect();
    let paused: Vec<usize> = crate::redis::cut::read(redis, &live_pkeys)
        .await
        .map_err(|e| redis.error(&e))?
        .iter()
        .enumerate()
        .filter(|(_, c)| c.meta.paused)
        .map(|(i, _)| i)
        .collect();
    let run_id = format!(
        "{:08x}",
        mix(spec.seed ^ Utc::now().timestamp_micros() as u64) as u32
    );
    let base = match &spec.shadow_prefix {
        Some(p) => p.clone(),
        None => format!("{}-dry-{run_id}", live_keys.prefix()),
    };
    let mut out = Vec::new();
    for &strategy in &spec.strategies {
        let prefix = format!("{base}-{}", strategy.as_str());
        let shadow = KeySpace::new(&prefix)?;
        if shadow.prefix() == live_keys.prefix() || base == live_keys.prefix() {
            return Err(Error::refused(format!(
                "the shadow prefix '{prefix}' is the live prefix: a dry run never touches live keys"
            )));
        }
        let in_use = redis
            .scan(&shadow.activity_pattern(&spec.activity))
            .await
            .map_err(|e| redis.error(&e))?;
        if !in_use.is_empty() {
            return Err(Error::bad_input(format!(
                "the shadow prefix '{prefix}' already holds {} keys of '{}': choose another --shadow-prefix",
                in_use.len(),
                spec.activity
            )));
        }
        let dir = TempDir::new(&format!("{run_id}-{}", strategy.as_str()))?;
        let url = SecretUrl::new(format!("sqlite://{}", dir.0.join("dry-run.db").display()));
        let db = Db::connect(&url, &DbOptions::default()).await?;
        let result = one_strategy(
            redis,
            &db,
            &shadow,
            &source,
            (&products, &paused),
            spec,
            strategy,
            &run_id,
            observer,
            stop.clone(),
        )
        .await;
        // The shadow keys go whatever happened; the directory goes with `dir`.
        let cleaned = cleanup(
            redis,
            &db,
            &shadow,
            &spec.activity,
            &CleanupOptions {
                force: true,
                actor: "dry-run",
                zone: Zone::default(),
            },
            &Silent,
        )
        .await;
        db.close().await;
        let stats = result?;
        cleaned?;
        out.push(stats);
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
async fn one_strategy(
    redis: &RedisStore,
    db: &Db,
    shadow: &KeySpace,
    source: &Activity,
    (products, paused): (&[Product], &[usize]),
    spec: &DryRunSpec,
    strategy: Strategy,
    run_id: &str,
    observer: Observer<'_>,
    stop: Arc<AtomicBool>,
) -> Result<RunStats> {
    migrate::migrate(db).await?;
    // The shadow activity is live now, whatever the real one's window: the gate checks it.
    let now = Utc::now();
    let def = ActivityDef {
        activity: Activity {
            starts_at: now - chrono::Duration::hours(1),
            ends_at: now + chrono::Duration::hours(1),
            status: crate::domain::activity::ActivityStatus::Scheduled,
            ..source.clone()
        },
        products: products.to_vec(),
        status_given: true,
    };
    let none = std::collections::HashSet::new();
    activities::import(db, &def, ("dry-run", "dry run copy"), &none).await?;
    if strategy == Strategy::Sql {
        for ddl in SQL_TABLES {
            db.execute(ddl, &[]).await.map_err(|e| db.error(&e))?;
        }
        for p in products {
            db.execute(
                "INSERT INTO dryrun_stock (product_id, stock) VALUES (?, ?)",
                &[p.product_id.as_str().into(), Arg::Int(p.initial_stock)],
            )
            .await
            .map_err(|e| db.error(&e))?;
        }
    } else {
        let opts = PreheatOptions {
            force: false,
            accept_eviction: false,
            actor: "dry-run".into(),
            grace: Duration::from_secs(60),
            // The shadow keys live no longer than a day past the run (cleanup removes them).
            key_ttl_days: 1,
            interleave: Default::default(),
        };
        let report = preheat(redis, db, shadow, &spec.activity, &opts, &Silent).await?;
        if report.decision != "go" {
            return Err(Error::check_failed(format!(
                "preheat of the shadow copy was a no-go: {}",
                report.reasons.join("; ")
            )));
        }
        let keys: Vec<_> = paused
            .iter()
            .map(|&i| shadow.product(&spec.activity, &products[i].product_id))
            .collect();
        // Generation 1: above the shadow preheat's (which wrote its copy selling).
        let refs: Vec<_> = keys.iter().map(|k| (k, 1)).collect();
        for r in crate::redis::control::set_paused_many(redis, &refs, true).await {
            r.map_err(|e| redis.error(&e))?;
        }
    }
    let demand = Demand {
        buyers: spec.buyers,
        repeat_share: spec.repeat_share,
        products: products.len(),
        quantity: 1,
        seed: spec.seed,
        run_id: format!("dry-{run_id}-{}", strategy.as_str()),
    };
    let load = LoadSpec {
        activity: spec.activity.clone(),
        keys: shadow.clone(),
        strategy,
        demand: demand.clone(),
        concurrency: spec.concurrency,
        rate: spec.rate,
        faults: spec.faults,
        payment: None,
        watch_negative: strategy != Strategy::Sql,
        retries: 2,
        clock: Default::default(),
    };
    let live = Arc::new(Live::default());
    observer(strategy, live.clone());
    let mut stats = run_load(redis, db, &load, live, stop).await?;
    stats.paused_products = paused
        .iter()
        .map(|&i| products[i].product_id.to_string())
        .collect();
    stats.invariants = check(redis, db, shadow, spec, strategy, products, &demand, &stats).await?;
    stats.ok = stats.invariants.iter().all(|i| i.ok);
    Ok(stats)
}

/// How a product's sales compare with what the demand and the limits allow.
#[derive(Debug, PartialEq, Eq)]
enum Sold {
    /// Exactly what was allowed (or at most that when some requests had no definite answer).
    Exact,
    /// Less than allowed, a known flaw of the strategy rather than a broken invariant.
    Under,
    /// More than allowed, or less where nothing excuses it.
    Wrong,
}

/// The decrement-then-roll-back strategy undersells by design: units taken by a buyer who is
/// about to be rolled back (sold out or over the limit) make a concurrent buyer see a negative
/// stock and leave sold out, and the units come back after that buyer is gone. Selling less is
/// that strategy's flaw to report; selling more is never allowed to any strategy.
fn sold_verdict(strategy: Strategy, definite: bool, got: i64, want: i64) -> Sold {
    if got > want {
        Sold::Wrong
    } else if got == want || !definite {
        Sold::Exact
    } else if strategy == Strategy::Hincrby {
        Sold::Under
    } else {
        Sold::Wrong
    }
}

fn inv(name: &str, ok: bool, detail: String) -> Invariant {
    Invariant {
        name: name.into(),
        ok,
        detail,
    }
}

/// The invariants of a dry run: exactly what the demand and the limits allow is sold (at most
/// that when some requests got no definite answer), no user above its limit, stock never
/// negative, nothing oversold, and for the Lua path ledger = orders = sold.
#[allow(clippy::too_many_arguments)]
async fn check(
    redis: &RedisStore,
    db: &Db,
    shadow: &KeySpace,
    spec: &DryRunSpec,
    strategy: Strategy,
    products: &[Product],
    demand: &Demand,
    stats: &RunStats,
) -> Result<Vec<Invariant>> {
    let mut out = Vec::new();
    let limits: Vec<i64> = products.iter().map(|p| p.per_user_limit).collect();
    let allowed = demand.allowed_units(&limits);
    let sold = orders::sold_by_product(db, &spec.activity).await?;
    let definite = stats.unknown == 0 && stats.errors == 0;
    let mut mismatches = Vec::new();
    let mut unsold = Vec::new();
    for (i, p) in products.iter().enumerate() {
        // The Lua deduction sells nothing of a paused product (the others ignore the flag).
        let paused = strategy == Strategy::Lua
            && stats
                .paused_products
                .iter()
                .any(|x| x == p.product_id.as_str());
        let want = if paused {
            0
        } else {
            p.initial_stock.min(allowed.get(i).copied().unwrap_or(0))
        };
        let got = sold.get(p.product_id.as_str()).copied().unwrap_or(0);
        match sold_verdict(strategy, definite, got, want) {
            Sold::Exact => {}
            Sold::Under => unsold.push(format!("{}: sold {got} of {want}", p.product_id)),
            Sold::Wrong => mismatches.push(format!("{}: sold {got}, allowed {want}", p.product_id)),
        }
    }
    out.push(inv(
        "sold = min(stock, what demand and limits allow)",
        mismatches.is_empty(),
        if !mismatches.is_empty() {
            mismatches.join("; ")
        } else if !unsold.is_empty() {
            format!(
                "units left unsold while buyers were refused (a decrement about to be rolled back held them): {}",
                unsold.join("; ")
            )
        } else if definite {
            "every product sold exactly what was allowed".into()
        } else {
            format!(
                "{} requests had no definite answer ({} unknown, {} errors): sold is at most what was allowed",
                stats.unknown + stats.errors,
                stats.unknown,
                stats.errors
            )
        },
    ));

    let per_user: Vec<(String, String, i64)> = db
        .fetch_all_as(
            &format!(
                "SELECT product_id, user_id, {} FROM seckill_order WHERE activity_id = ? AND status IN ('pending_payment', 'paid') GROUP BY product_id, user_id",
                db.sum_i64("quantity")
            ),
            &[spec.activity.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    let limit_of: HashMap<&str, i64> = products
        .iter()
        .map(|p| (p.product_id.as_str(), p.per_user_limit))
        .collect();
    let over: Vec<String> = per_user
        .iter()
        .filter(|(p, _, q)| *q > limit_of.get(p.as_str()).copied().unwrap_or(i64::MAX))
        .map(|(p, u, q)| format!("{u} holds {q} of {p}"))
        .collect();
    out.push(inv(
        "no user above its limit",
        over.is_empty(),
        if over.is_empty() {
            "every user within the limit".into()
        } else {
            over.join("; ")
        },
    ));

    out.push(inv(
        "nothing oversold",
        stats.oversold == 0,
        format!("{} units sold beyond the stock", stats.oversold),
    ));

    let remaining = remaining(redis, db, shadow, spec, strategy, products).await?;
    let negative: Vec<String> = products
        .iter()
        .zip(&remaining)
        .filter(|(_, r)| r.is_some_and(|v| v < 0))
        .map(|(p, r)| format!("{} at {}", p.product_id, r.unwrap_or_default()))
        .collect();
    // The rollback strategy goes below zero between its decrement and its rollback by design:
    // that is reported (negative_seen), and only a negative stock left behind fails it.
    let transient_ok = strategy == Strategy::Hincrby || stats.negative_seen == 0;
    out.push(inv(
        "stock never negative",
        negative.is_empty() && transient_ok,
        if negative.is_empty() {
            format!(
                "final stock >= 0; negative seen in {} samples while running",
                stats.negative_seen
            )
        } else {
            format!("negative stock left behind: {}", negative.join(", "))
        },
    ));

    let mut books = Vec::new();
    for (p, r) in products.iter().zip(&remaining) {
        let s = sold.get(p.product_id.as_str()).copied().unwrap_or(0);
        match r {
            Some(r) if p.initial_stock - r != s && definite => {
                books.push(format!(
                    "{}: initial {} - remaining {r} != sold {s}",
                    p.product_id, p.initial_stock
                ));
            }
            None => books.push(format!("{}: the stock is missing or corrupt", p.product_id)),
            _ => {}
        }
    }
    if strategy == Strategy::Lua {
        let keys: Vec<ProductKeys> = products
            .iter()
            .map(|p| shadow.product(&spec.activity, &p.product_id))
            .collect();
        for (p, k) in products.iter().zip(&keys) {
            let active = ledger::active_units(redis, k)
                .await
                .map_err(|e| redis.error(&e))?;
            let (in_ledger, bad) = (active.units, active.corrupt);
            let s = sold.get(p.product_id.as_str()).copied().unwrap_or(0);
            let ok = if definite {
                in_ledger == s
            } else {
                in_ledger >= s
            };
            if !ok || bad > 0 {
                books.push(format!(
                    "{}: ledger {in_ledger} units, orders {s} units, {bad} corrupt entries",
                    p.product_id
                ));
            }
        }
    }
    out.push(inv(
        if strategy == Strategy::Lua {
            "ledger = orders = sold"
        } else {
            "orders = initial - remaining"
        },
        books.is_empty(),
        if books.is_empty() {
            "the books balance".into()
        } else {
            books.join("; ")
        },
    ));
    Ok(out)
}

/// The stock left per product: Redis for the Redis strategies, the table for `sql`.
async fn remaining(
    redis: &RedisStore,
    db: &Db,
    shadow: &KeySpace,
    spec: &DryRunSpec,
    strategy: Strategy,
    products: &[Product],
) -> Result<Vec<Option<i64>>> {
    if strategy == Strategy::Sql {
        let rows: Vec<(String, i64)> = db
            .fetch_all_as("SELECT product_id, stock FROM dryrun_stock", &[])
            .await
            .map_err(|e| db.error(&e))?;
        let by: HashMap<String, i64> = rows.into_iter().collect();
        return Ok(products
            .iter()
            .map(|p| by.get(p.product_id.as_str()).copied())
            .collect());
    }
    let keys: Vec<ProductKeys> = products
        .iter()
        .map(|p| shadow.product(&spec.activity, &p.product_id))
        .collect();
    let cuts = cut::read(redis, &keys).await.map_err(|e| redis.error(&e))?;
    Ok(cuts.iter().map(|c| c.stock.value()).collect())
}

#[cfg(test)]
mod tests {
    use super::{Sold, Strategy, sold_verdict};

    #[test]
    fn only_the_rollback_strategy_may_sell_less_than_allowed() {
        for s in [Strategy::Lua, Strategy::Lock, Strategy::Sql] {
            assert_eq!(sold_verdict(s, true, 40, 40), Sold::Exact);
            assert_eq!(sold_verdict(s, true, 39, 40), Sold::Wrong, "{s:?}");
            assert_eq!(sold_verdict(s, true, 41, 40), Sold::Wrong, "{s:?}");
        }
        assert_eq!(sold_verdict(Strategy::Hincrby, true, 39, 40), Sold::Under);
        assert_eq!(sold_verdict(Strategy::Hincrby, true, 41, 40), Sold::Wrong);
        assert_eq!(sold_verdict(Strategy::Hincrby, true, 40, 40), Sold::Exact);
    }

    #[test]
    fn without_definite_answers_less_is_fine_and_more_is_still_wrong() {
        for s in [
            Strategy::Lua,
            Strategy::Hincrby,
            Strategy::Lock,
            Strategy::Sql,
        ] {
            assert_eq!(sold_verdict(s, false, 10, 40), Sold::Exact);
            assert_eq!(sold_verdict(s, false, 41, 40), Sold::Wrong);
        }
    }
}
