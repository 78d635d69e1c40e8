//! Reads of a product's stock and meta hash, and how their replies become values; the cut
//! (`super::cut`) sends them.

use super::keys::ProductKeys;
use super::reply::{bytes, is_wrong_type, text};
use super::{Keyed, RedisStore};
use crate::domain::stock::{META_FIELDS, Meta, StockValue};
use redis::{RedisResult, Value};

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

/// Replaces the empty type of each wrong-type stock with the key's real type (one TYPE per
/// such product).
pub async fn name_wrong_types(
    redis: &RedisStore,
    keys: &[ProductKeys],
    cuts: &mut [super::cut::ProductCut],
) -> RedisResult<()> {
    let wrong: Vec<usize> = cuts
        .iter()
        .enumerate()
        .filter(|(_, c)| matches!(c.stock, StockValue::WrongType(_)))
        .map(|(i, _)| i)
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    let items: Vec<Keyed> = wrong
        .iter()
        .map(|&i| {
            Keyed::new(
                &keys[i].stock,
                redis::cmd("TYPE").arg(&keys[i].stock).clone(),
            )
        })
        .collect();
    for (&i, r) in wrong.iter().zip(redis.pipeline(items).await) {
        cuts[i].stock = StockValue::WrongType(text(&r?).unwrap_or_default());
    }
    Ok(())
}
