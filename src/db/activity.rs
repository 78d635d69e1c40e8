//! Activities and products in the database.

use super::audit::{self, AuditEntry};
use super::stamp::DbTime;
use super::{Arg, Db};
use crate::domain::activity::{ActivityStatus, Pause};
use crate::domain::{Activity, ActivityDef, ActivityId, Product, ProductId};
use crate::error::{Error, Result};
use chrono::Utc;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Rows per multi-row INSERT: 5 binds each, far below every backend's parameter limit.
const INSERT_BATCH: usize = 500;

/// What an import changed.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ImportReport {
    pub activity: ActivityId,
    pub activity_created: bool,
    pub products_created: usize,
    pub products_updated: usize,
    pub products_unchanged: usize,
    /// Products in the database that the file does not list; an import never deletes them.
    pub products_not_in_file: Vec<ProductId>,
}

type ActivityRow = (String, String, DbTime, DbTime, String);
type ProductRow = (String, String, i64, i64, i64, String, i64);

/// The columns of a [`ProductRow`].
const PRODUCT_COLUMNS: &str =
    "product_id, name, initial_stock, per_user_limit, paused, pause_reason, pause_gen";

fn activity_from(row: ActivityRow) -> Result<Activity> {
    Ok(Activity {
        activity_id: ActivityId::parse(&row.0).map_err(|e| {
            Error::internal(format!("seckill_activity holds a bad id: {}", e.message))
        })?,
        name: row.1,
        starts_at: row.2.0,
        ends_at: row.3.0,
        status: ActivityStatus::parse(&row.4).ok_or_else(|| {
            Error::internal(format!(
                "seckill_activity holds the status '{}' for activity '{}': expected draft, scheduled or cancelled",
                crate::domain::stock::shown(row.4.as_bytes()),
                row.0
            ))
        })?,
    })
}

fn product_from(row: ProductRow) -> Result<Product> {
    Ok(Product {
        product_id: ProductId::parse(&row.0).map_err(|e| {
            Error::internal(format!("seckill_product holds a bad id: {}", e.message))
        })?,
        name: row.1,
        initial_stock: row.2,
        per_user_limit: row.3,
        pause: Pause {
            paused: row.4 != 0,
            reason: row.5,
            generation: row.6,
        },
        window: None,
    })
}

/// Writes an activity and its products in one transaction, with an audit row. Existing products
/// are updated in place; products missing from the file are reported, never deleted.
///
/// A re-import may raise a product's stock but not cut it below the units of its live orders,
/// nor cut at all a product whose keys are in Redis (`in_redis`: the caller checked): Redis
/// would go on selling the units the database took away. `topup --add -N` moves both sides
/// in order; the error says so and nothing is written.
pub async fn import(
    db: &Db,
    def: &ActivityDef,
    (actor, source): (&str, &str),
    in_redis: &HashSet<String>,
) -> Result<ImportReport> {
    // Two consoles importing a new activity at once both find it absent and insert it; the
    // second INSERT breaks the key and its transaction rolls back whole. Once more, it finds
    // the activity and updates it, as a re-import does.
    let raced = std::sync::atomic::AtomicBool::new(false);
    match import_once(db, def, (actor, source), in_redis, &raced).await {
        Err(_) if raced.load(std::sync::atomic::Ordering::Relaxed) => {
            import_once(db, def, (actor, source), in_redis, &raced).await
        }
        done => done,
    }
}

async fn import_once(
    db: &Db,
    def: &ActivityDef,
    (actor, source): (&str, &str),
    in_redis: &HashSet<String>,
    raced: &std::sync::atomic::AtomicBool,
) -> Result<ImportReport> {
    let err = |e: sqlx::Error| {
        if let sqlx::Error::Database(d) = &e
            && d.kind() == sqlx::error::ErrorKind::UniqueViolation
        {
            raced.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        db.error(&e).context("import")
    };
    let a = &def.activity;
    let now = Utc::now();
    let mut tx = db.begin().await.map_err(err)?;

    let exists = tx
        .scalar_i64(
            "SELECT COUNT(*) FROM seckill_activity WHERE activity_id = ?",
            &[a.activity_id.as_str().into()],
        )
        .await
        .map_err(err)?
        .unwrap_or(0)
        > 0;
    if exists && !def.status_given {
        // No status in the file: the database's stays (re-importing the original file of a
        // cancelled activity must not put it back on sale).
        tx.execute(
            "UPDATE seckill_activity SET name = ?, starts_at = ?, ends_at = ?, updated_at = ? \
             WHERE activity_id = ?",
            &[
                a.name.clone().into(),
                Arg::Time(a.starts_at),
                Arg::Time(a.ends_at),
                Arg::Time(now),
                a.activity_id.as_str().into(),
            ],
        )
        .await
        .map_err(err)?;
    } else if exists {
        tx.execute(
            "UPDATE seckill_activity SET name = ?, starts_at = ?, ends_at = ?, status = ?, updated_at = ? \
             WHERE activity_id = ?",
            &[
                a.name.clone().into(),
                Arg::Time(a.starts_at),
                Arg::Time(a.ends_at),
                a.status.as_str().into(),
                Arg::Time(now),
                a.activity_id.as_str().into(),
            ],
        )
        .await
        .map_err(err)?;
    } else {
        tx.execute(
            "INSERT INTO seckill_activity (activity_id, name, starts_at, ends_at, status, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
            &[
                a.activity_id.as_str().into(),
                a.name.clone().into(),
                Arg::Time(a.starts_at),
                Arg::Time(a.ends_at),
                a.status.as_str().into(),
                Arg::Time(now),
                Arg::Time(now),
            ],
        )
        .await
        .map_err(err)?;
    }

    let existing: Vec<ProductRow> = tx
        .fetch_all_as(
            &format!("SELECT {PRODUCT_COLUMNS} FROM seckill_product WHERE activity_id = ?"),
            &[a.activity_id.as_str().into()],
        )
        .await
        .map_err(err)?;
    let mut existing: HashMap<String, ProductRow> =
        existing.into_iter().map(|r| (r.0.clone(), r)).collect();

    let mut report = ImportReport {
        activity: a.activity_id.clone(),
        activity_created: !exists,
        products_created: 0,
        products_updated: 0,
        products_unchanged: 0,
        products_not_in_file: Vec::new(),
    };
    let cuts: Vec<(&str, i64)> = def
        .products
        .iter()
        .filter_map(|p| {
            let (_, _, stock, ..) = existing.get(p.product_id.as_str())?;
            (p.initial_stock < *stock).then_some((p.product_id.as_str(), p.initial_stock))
        })
        .collect();
    refuse_cuts(&mut tx, &a.activity_id, &cuts, in_redis).await?;
    let mut new_rows: Vec<&Product> = Vec::new();
    for p in &def.products {
        match existing.remove(p.product_id.as_str()) {
            None => new_rows.push(p),
            Some((_, name, stock, limit, ..)) => {
                if name == p.name && stock == p.initial_stock && limit == p.per_user_limit {
                    report.products_unchanged += 1;
                    continue;
                }
                tx.execute(
                    "UPDATE seckill_product SET name = ?, initial_stock = ?, per_user_limit = ? \
                     WHERE activity_id = ? AND product_id = ?",
                    &[
                        p.name.clone().into(),
                        Arg::Int(p.initial_stock),
                        Arg::Int(p.per_user_limit),
                        a.activity_id.as_str().into(),
                        p.product_id.as_str().into(),
                    ],
                )
                .await
                .map_err(err)?;
                report.products_updated += 1;
            }
        }
    }
    for batch in new_rows.chunks(INSERT_BATCH) {
        let values = vec!["(?, ?, ?, ?, ?)"; batch.len()].join(", ");
        let sql = format!(
            "INSERT INTO seckill_product (activity_id, product_id, name, initial_stock, per_user_limit) VALUES {values}"
        );
        let mut args = Vec::with_capacity(batch.len() * 5);
        for p in batch {
            args.push(a.activity_id.as_str().into());
            args.push(p.product_id.as_str().into());
            args.push(p.name.clone().into());
            args.push(Arg::Int(p.initial_stock));
            args.push(Arg::Int(p.per_user_limit));
        }
        tx.execute(&sql, &args).await.map_err(err)?;
        report.products_created += batch.len();
    }
    let mut leftover: Vec<String> = existing.into_keys().collect();
    leftover.sort();
    report.products_not_in_file = leftover
        .iter()
        .filter_map(|p| ProductId::parse(p).ok())
        .collect();

    let mut entry = AuditEntry::new(actor, "activity.import", &a.activity_id);
    entry.reason = format!("import of {source}");
    entry.detail = serde_json::to_string(&report).unwrap_or_default();
    audit::record_in(&mut tx, &entry).await.map_err(err)?;
    tx.commit().await.map_err(err)?;
    Ok(report)
}

/// Refuses the import when a product's stock would be cut while Redis holds its keys, or below
/// the units its live orders hold.
async fn refuse_cuts(
    tx: &mut super::Tx,
    activity: &ActivityId,
    cuts: &[(&str, i64)],
    in_redis: &HashSet<String>,
) -> Result<()> {
    if let Some((p, to)) = cuts.iter().find(|(p, _)| in_redis.contains(*p)) {
        return Err(Error::refused(format!(
            "products[{p}].stock: the import would cut {p} to {to} while its keys are in Redis, which would go on selling the units taken away; nothing was written. Use `seckill-console topup {activity} --product {p} --add -N` (it moves Redis first), or leave the stock as it is in the file"
        )));
    }
    if cuts.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = cuts.iter().map(|(p, _)| *p).collect();
    // The sums every read sends, along the index that holds the quantity.
    let sql = super::orders::live_sums_sql(tx.db(), true);
    let sold: Vec<(String, i64)> = tx
        .fetch_all_in(&sql, &[activity.as_str().into()], &ids)
        .await
        .map_err(|e| tx.db().error(&e))?;
    for (p, to) in cuts {
        if let Some((_, units)) = sold.iter().find(|(id, _)| id == p)
            && *to < *units
        {
            return Err(Error::refused(format!(
                "products[{p}].stock: {to} is below the {units} unit(s) its live orders hold; nothing was written (a stock is never cut below what is sold)"
            )));
        }
    }
    Ok(())
}

/// One activity, if it exists.
pub async fn get(db: &Db, id: &ActivityId) -> Result<Option<Activity>> {
    let row: Option<ActivityRow> = db
        .fetch_optional_as(
            "SELECT activity_id, name, starts_at, ends_at, status FROM seckill_activity WHERE activity_id = ?",
            &[id.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    row.map(activity_from).transpose()
}

/// One activity, or a bad-input error that says how to list them.
pub async fn require(db: &Db, id: &ActivityId) -> Result<Activity> {
    get(db, id).await?.ok_or_else(|| {
        Error::bad_input(format!(
            "activity '{id}' does not exist in {}: see `seckill-console activity list`",
            db.label()
        ))
    })
}

/// The products of an activity, ordered by id.
pub async fn products(db: &Db, id: &ActivityId) -> Result<Vec<Product>> {
    let rows: Vec<ProductRow> = db
        .fetch_all_as(
            &format!(
                "SELECT {PRODUCT_COLUMNS} FROM seckill_product WHERE activity_id = ? ORDER BY product_id"
            ),
            &[id.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    // Byte order, whatever the server's collation: the same listing on every backend.
    let mut rows = rows;
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    with_window(db, id, rows).await
}

/// The products of `rows`, each with its activity's sale window (one read of the activity's
/// row): every write of a product's meta hash carries it.
async fn with_window(db: &Db, id: &ActivityId, rows: Vec<ProductRow>) -> Result<Vec<Product>> {
    let window = get(db, id).await?.map(|a| a.sale_window());
    rows.into_iter()
        .map(|r| {
            product_from(r).map(|mut p| {
                p.window = window;
                p
            })
        })
        .collect()
}

/// Some products of an activity (ids it does not have are simply absent), ordered by id. In
/// chunks, so a fix of a few products of a huge activity does not read all of them.
pub async fn products_by_ids(db: &Db, id: &ActivityId, ids: &[String]) -> Result<Vec<Product>> {
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut rows: Vec<ProductRow> = db
        .fetch_all_in(
            &format!(
                "SELECT {PRODUCT_COLUMNS} FROM seckill_product WHERE activity_id = ? AND product_id IN (...)"
            ),
            &[id.as_str().into()],
            &ids,
        )
        .await
        .map_err(|e| db.error(&e))?;
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    with_window(db, id, rows).await
}

/// An activity with its product count and total stock.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ActivitySummary {
    #[serde(flatten)]
    pub activity: Activity,
    pub products: i64,
    pub total_stock: i64,
}

/// Every activity's row, newest window first: the list without its products' figures.
pub async fn rows(db: &Db) -> Result<Vec<Activity>> {
    let rows: Vec<ActivityRow> = db
        .fetch_all_as(
            "SELECT activity_id, name, starts_at, ends_at, status FROM seckill_activity \
             ORDER BY starts_at DESC, activity_id",
            &[],
        )
        .await
        .map_err(|e| db.error(&e))?;
    rows.into_iter().map(activity_from).collect()
}

/// How many products each activity has and their total stock (of the activities `only`, when
/// given); an activity without products is absent.
pub async fn totals(db: &Db, only: Option<&[&str]>) -> Result<HashMap<String, (i64, i64)>> {
    let sql = format!(
        "SELECT activity_id, COUNT(*), {} FROM seckill_product",
        db.sum_i64("initial_stock")
    );
    let rows: Vec<(String, i64, i64)> = match only {
        None => {
            db.fetch_all_as(&format!("{sql} GROUP BY activity_id"), &[])
                .await
        }
        Some(ids) => {
            db.fetch_all_in(
                &format!("{sql} WHERE activity_id IN (...) GROUP BY activity_id"),
                &[],
                ids,
            )
            .await
        }
    }
    .map_err(|e| db.error(&e))?;
    Ok(rows.into_iter().map(|(a, n, s)| (a, (n, s))).collect())
}

/// The activities with their products' figures from `totals` (none: no product).
pub fn summarize(
    activities: Vec<Activity>,
    totals: &HashMap<String, (i64, i64)>,
) -> Vec<ActivitySummary> {
    activities
        .into_iter()
        .map(|activity| {
            let (products, total_stock) = totals
                .get(activity.activity_id.as_str())
                .copied()
                .unwrap_or((0, 0));
            ActivitySummary {
                activity,
                products,
                total_stock,
            }
        })
        .collect()
}

/// Every activity, newest window first, with its products' figures.
pub async fn list(db: &Db) -> Result<Vec<ActivitySummary>> {
    let totals = totals(db, None).await?;
    Ok(summarize(rows(db).await?, &totals))
}
