//! One product looked at closely (the TUI's detail, Enter on a row): its keys with their types,
//! sizes, TTLs and memory; its stock and meta hash; the newest page of its events; its orders
//! by status; the console's last writes on it. An operator's one-off look, and bounded however
//! big the sale: one pipeline of O(1) commands and one page of the stream in Redis (the ledger,
//! buyers and books hashes are counted, never read), one grouped query on the orders' index (capped at 100,000 rows)
//! and one short walk of the audit.

use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::db::orders::{self, OrderCount};
use crate::domain::events::Event;
use crate::domain::{ActivityId, ProductId};
use crate::error::Result;
use crate::redis::events;
use crate::redis::keys::SUFFIXES;
use crate::redis::reply::{pairs, text};
use crate::redis::{KeySpace, Keyed, RedisStore};
use chrono::{DateTime, Utc};
use redis::{RedisResult, Value};

/// Events shown: the newest page.
pub const EVENTS_SHOWN: usize = 20;

/// Fields of the meta hash read (it holds about a dozen).
const META_FIELDS: usize = 100;

/// Console writes shown.
pub const WRITES_SHOWN: i64 = 10;

/// One key of the product as Redis holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInfo {
    /// `stock`, `meta`, ...
    pub suffix: &'static str,
    pub name: String,
    /// What TYPE answers (`none` when the key is absent), or the error.
    pub kind: String,
    /// Characters, fields or entries, by type; None when absent or of an unexpected type.
    pub size: Option<i64>,
    /// PTTL: None without an expiry (or absent).
    pub ttl_ms: Option<i64>,
    /// MEMORY USAGE (sampled), None where it is not allowed.
    pub bytes: Option<i64>,
}

/// What the detail shows.
#[derive(Clone, Debug)]
pub struct ProductDetail {
    pub product: String,
    pub keys: Vec<KeyInfo>,
    /// The stock key's raw text (it may be corrupt: shown as it is).
    pub stock: Option<String>,
    /// The meta hash, field by field, sorted by field.
    pub meta: Vec<(String, String)>,
    /// The newest events, newest first.
    pub events: Vec<Event>,
    /// Entries of that page that did not parse.
    pub events_bad: usize,
    pub orders: Vec<OrderCount>,
    /// The orders were counted up to [`orders::STATUS_COUNT_CAP`]: the counts are "at least".
    pub orders_capped: bool,
    /// The console's newest writes on the product, newest first.
    pub writes: Vec<AuditEntry>,
    pub read_at: DateTime<Utc>,
}

/// The size command that suits the type a key of this suffix should have.
fn size_cmd(suffix: &str, key: &str) -> redis::Cmd {
    let name = match suffix {
        "stock" => "STRLEN",
        "events" => "XLEN",
        _ => "HLEN",
    };
    let mut c = redis::cmd(name);
    c.arg(key);
    c
}

fn int(r: &RedisResult<Value>) -> Option<i64> {
    match r {
        Ok(Value::Int(i)) => Some(*i),
        _ => None,
    }
}

/// Reads the detail of one product.
pub async fn product_detail(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    product: &ProductId,
) -> Result<ProductDetail> {
    let k = keys.product(activity, product);
    let names = [&k.stock, &k.meta, &k.buyers, &k.ledger, &k.events, &k.books];
    // Per key: TYPE, its size, PTTL, MEMORY USAGE; then the stock, the meta hash and a page
    // of the stream. All on the product's slot, in one pipeline.
    let mut items: Vec<Keyed> = Vec::new();
    for (suffix, name) in SUFFIXES.iter().zip(names) {
        items.push(Keyed::new(name, redis::cmd("TYPE").arg(name).clone()));
        items.push(Keyed::new(name, size_cmd(suffix, name)));
        items.push(Keyed::new(name, redis::cmd("PTTL").arg(name).clone()));
        items.push(Keyed::new(
            name,
            redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(name)
                .arg("SAMPLES")
                .arg(5)
                .clone(),
        ));
    }
    items.push(Keyed::new(
        &k.stock,
        redis::cmd("GET").arg(&k.stock).clone(),
    ));
    // HSCAN, not HGETALL: a read-only console sends no command whose cost has no bound, and
    // the meta hash's few fields come back in one page.
    items.push(Keyed::new(
        &k.meta,
        redis::cmd("HSCAN")
            .arg(&k.meta)
            .arg(0)
            .arg("COUNT")
            .arg(META_FIELDS)
            .clone(),
    ));
    items.push(events::newest_page(&k, EVENTS_SHOWN));
    let replies = redis.pipeline(items).await;
    // A connection error fails the whole read; a per-key error (a denied MEMORY, a wrong type)
    // shows in its cell.
    if let Some(Err(e)) = replies.iter().find(|r| {
        r.as_ref()
            .err()
            .is_some_and(crate::redis::node::is_connection_error)
    }) {
        return Err(redis.error(e));
    }
    let mut out_keys = Vec::new();
    for (i, (suffix, name)) in SUFFIXES.iter().zip(names).enumerate() {
        let r = &replies[i * 4..i * 4 + 4];
        let kind = match &r[0] {
            Ok(v) => text(v).unwrap_or_else(|| "?".into()),
            Err(e) => format!("error: {e}"),
        };
        let present = kind != "none";
        out_keys.push(KeyInfo {
            suffix,
            name: name.clone(),
            size: int(&r[1]).filter(|_| present),
            ttl_ms: int(&r[2]).filter(|t| *t >= 0),
            bytes: int(&r[3]),
            kind,
        });
    }
    let base = SUFFIXES.len() * 4;
    let stock = replies
        .get(base)
        .and_then(|r| r.as_ref().ok())
        .and_then(text);
    let mut meta: Vec<(String, String)> = replies
        .get(base + 1)
        .and_then(|r| r.as_ref().ok())
        .map(|v| match v {
            // [cursor, [field, value, ...]]
            Value::Array(parts) => parts.get(1).map(pairs).unwrap_or_default(),
            _ => Vec::new(),
        })
        .unwrap_or_default()
        .into_iter()
        .map(|(f, v)| {
            (
                String::from_utf8_lossy(&f).into_owned(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect();
    meta.sort();
    let page = replies
        .get(base + 2)
        .and_then(|r| r.as_ref().ok())
        .map(|v| events::parse_page(v, EVENTS_SHOWN))
        .unwrap_or_default();
    let (orders, orders_capped) = orders::by_status(db, activity, product.as_str()).await?;
    Ok(ProductDetail {
        product: product.to_string(),
        keys: out_keys,
        stock,
        meta,
        events: page.events,
        events_bad: page.bad,
        orders,
        orders_capped,
        writes: audit::recent_of_product(db, activity, product.as_str(), WRITES_SHOWN)
            .await
            .map_err(|e| db.error(&e))?,
        read_at: Utc::now(),
    })
}
