//! Pipelined reads of many products' keys: stock, meta, ledger size, and (when needed) the
//! ledger itself. One pipeline per node, never a round trip per product.

use super::keys::ProductKeys;
use super::{Keyed, RedisStore};
use crate::domain::stock::{LedgerEntry, META_FIELDS, Meta, StockValue};
use redis::{ErrorKind, RedisError, RedisResult, Value};

/// What Redis holds for one product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProductState {
    pub stock: StockValue,
    pub meta: Meta,
    /// HLEN of the ledger; None when the ledger key has the wrong type.
    pub ledger_len: Option<i64>,
}

fn is_wrong_type(e: &RedisError) -> bool {
    e.code() == Some("WRONGTYPE")
}

fn bytes(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Int(i) => Some(i.to_string().into_bytes()),
        _ => None,
    }
}

/// GET of the stock key.
pub fn get_stock(k: &ProductKeys) -> Keyed {
    Keyed::new(&k.stock, redis::cmd("GET").arg(&k.stock).clone())
}

/// HMGET of the meta fields.
pub fn get_meta(k: &ProductKeys) -> Keyed {
    let mut hm = redis::cmd("HMGET");
    hm.arg(&k.meta).arg(&META_FIELDS[..]);
    Keyed::new(&k.meta, hm)
}

/// The stock from a GET reply. A key of another type comes back as `WrongType("")` (its type
/// is read separately when it matters).
pub fn stock_from(reply: &RedisResult<Value>) -> RedisResult<StockValue> {
    match reply {
        Ok(Value::Nil) => Ok(StockValue::Missing),
        Ok(v) => Ok(StockValue::from_raw(bytes(v).as_deref())),
        Err(e) if is_wrong_type(e) => Ok(StockValue::WrongType(String::new())),
        Err(e) => Err(e.clone()),
    }
}

/// The meta hash from an HMGET reply of [`META_FIELDS`].
pub fn meta_from(reply: &RedisResult<Value>) -> RedisResult<Meta> {
    match reply {
        Ok(Value::Array(fields)) => {
            let f: Vec<Option<Vec<u8>>> = fields.iter().map(bytes).collect();
            Ok(Meta::from_fields(&f))
        }
        Ok(_) => Ok(Meta::default()),
        Err(e) if is_wrong_type(e) => Ok(Meta {
            present: true,
            corrupt: Some("the meta key has the wrong type: every deduction fails".into()),
            ..Meta::default()
        }),
        Err(e) => Err(e.clone()),
    }
}

/// Reads stock, meta and (with `ledger`) the ledger size of every product. A wrong-type key is
/// reported per product; any other error fails the whole read (the caller reports Redis
/// unavailable).
pub async fn read_states(
    redis: &RedisStore,
    keys: &[ProductKeys],
    ledger: bool,
) -> RedisResult<Vec<ProductState>> {
    let per = if ledger { 3 } else { 2 };
    let mut items = Vec::with_capacity(keys.len() * per);
    for k in keys {
        items.push(get_stock(k));
        items.push(get_meta(k));
        if ledger {
            items.push(Keyed::new(
                &k.ledger,
                redis::cmd("HLEN").arg(&k.ledger).clone(),
            ));
        }
    }
    let results = redis.pipeline(items).await;
    let mut wrong_type_stock = Vec::new();
    let mut out = Vec::with_capacity(keys.len());
    for (i, chunk) in results.chunks(per).enumerate() {
        let (stock, meta) = match chunk {
            [s, m, ..] => (stock_from(s)?, meta_from(m)?),
            _ => return Err(RedisError::from((ErrorKind::Parse, "short pipeline reply"))),
        };
        let ledger_len = match chunk.get(2) {
            None | Some(Ok(Value::Nil)) => Some(0),
            Some(Ok(Value::Int(n))) => Some(*n),
            Some(Ok(_)) => Some(0),
            Some(Err(e)) if is_wrong_type(e) => None,
            Some(Err(e)) => return Err(e.clone()),
        };
        if matches!(stock, StockValue::WrongType(_)) {
            wrong_type_stock.push(i);
        }
        out.push(ProductState {
            stock,
            meta,
            ledger_len,
        });
    }
    if !wrong_type_stock.is_empty() {
        let items: Vec<Keyed> = wrong_type_stock
            .iter()
            .map(|&i| {
                Keyed::new(
                    &keys[i].stock,
                    redis::cmd("TYPE").arg(&keys[i].stock).clone(),
                )
            })
            .collect();
        for (&i, r) in wrong_type_stock.iter().zip(redis.pipeline(items).await) {
            let t = match r? {
                Value::SimpleString(s) => s,
                v => bytes(&v)
                    .map(|b| String::from_utf8_lossy(&b).to_string())
                    .unwrap_or_default(),
            };
            out[i].stock = StockValue::WrongType(t);
        }
    }
    Ok(out)
}

/// Reads the whole ledger of each product given. Entries that do not parse are skipped and
/// counted in the second value.
pub async fn read_ledgers(
    redis: &RedisStore,
    keys: &[&ProductKeys],
) -> RedisResult<Vec<(Vec<LedgerEntry>, usize)>> {
    let items: Vec<Keyed> = keys
        .iter()
        .map(|k| Keyed::new(&k.ledger, redis::cmd("HGETALL").arg(&k.ledger).clone()))
        .collect();
    let mut out = Vec::with_capacity(keys.len());
    for r in redis.pipeline(items).await {
        let v = match r {
            Ok(v) => v,
            Err(e) if is_wrong_type(&e) => {
                out.push((Vec::new(), 0));
                continue;
            }
            Err(e) => return Err(e),
        };
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = match v {
            Value::Array(items) => items
                .chunks(2)
                .filter_map(|p| match p {
                    [k, v] => Some((bytes(k)?, bytes(v)?)),
                    _ => None,
                })
                .collect(),
            Value::Map(m) => m
                .iter()
                .filter_map(|(k, v)| Some((bytes(k)?, bytes(v)?)))
                .collect(),
            _ => Vec::new(),
        };
        let mut entries = Vec::with_capacity(pairs.len());
        let mut bad = 0;
        for (k, v) in pairs {
            match LedgerEntry::parse(&String::from_utf8_lossy(&k), &v) {
                Some(e) => entries.push(e),
                None => bad += 1,
            }
        }
        out.push((entries, bad));
    }
    Ok(out)
}
