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

/// Fields one read of the meta hash returns at most. The scripts write about a dozen; a hash
/// holding this many was written by something else and is read by name instead.
pub const META_READ_MAX: usize = 64;

/// `HRANDFIELD meta 64 WITHVALUES`: the whole hash in one read when it holds fewer than 64
/// fields (Redis then returns all of them), and never more than 64 however large it grew. It
/// costs Redis about 2.1 us a product against 3.5 us for HMGET of the thirteen
/// [`META_FIELDS`], most of which a product does not hold (redis-cli --pipe, 100,000
/// preheated products, 2026-12-05). HGETALL would cost the same on our hash but grows with a
/// hash written by anyone else.
pub fn get_meta_whole(k: &ProductKeys) -> Keyed {
    let mut cmd = redis::cmd("HRANDFIELD");
    cmd.arg(&k.meta).arg(META_READ_MAX).arg("WITHVALUES");
    Keyed::new(&k.meta, cmd)
}

/// The meta hash from an HRANDFIELD reply of [`get_meta_whole`]; None when the reply holds
/// [`META_READ_MAX`] fields, so the hash may hold more (read it with [`get_meta`] then).
pub fn meta_from_whole(reply: &RedisResult<Value>) -> RedisResult<Option<Meta>> {
    let v = match reply {
        Ok(v) => v,
        Err(_) => return meta_from(reply).map(Some),
    };
    let found = super::reply::pairs(v);
    if found.len() >= META_READ_MAX {
        return Ok(None);
    }
    let mut fields: Vec<Option<Vec<u8>>> = vec![None; META_FIELDS.len()];
    for (name, value) in found {
        if let Some(i) = META_FIELDS
            .iter()
            .position(|f| f.as_bytes() == name.as_slice())
        {
            fields[i] = Some(value);
        }
    }
    Ok(Some(Meta::from_fields(&fields)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_whole_meta_reads_as_the_named_fields_do() {
        let flat = Value::Array(
            [
                "initial", "100", "epoch", "5", "limit", "2", "deducted", "7", "rev", "3",
            ]
            .into_iter()
            .map(bulk)
            .collect(),
        );
        let named = Value::Array(
            META_FIELDS
                .iter()
                .map(|f| match *f {
                    "initial" => bulk("100"),
                    "limit" => bulk("2"),
                    "deducted" => bulk("7"),
                    "rev" => bulk("3"),
                    _ => Value::Nil,
                })
                .collect(),
        );
        let whole = meta_from_whole(&Ok(flat.clone()))
            .expect("read")
            .expect("narrow");
        assert_eq!(whole, meta_from(&Ok(named)).expect("read"));
        assert_eq!(whole.deducted, Some(7));
        // RESP3 answers pairs.
        let Value::Array(items) = flat else {
            unreachable!()
        };
        let paired = Value::Array(items.chunks(2).map(|p| Value::Array(p.to_vec())).collect());
        assert_eq!(meta_from_whole(&Ok(paired)).expect("read"), Some(whole));
        // No hash: nothing present.
        let none = meta_from_whole(&Ok(Value::Array(vec![])))
            .expect("read")
            .expect("narrow");
        assert!(!none.present);
    }

    #[test]
    fn a_hash_as_wide_as_one_read_is_read_by_name() {
        let wide = Value::Array(
            (0..META_READ_MAX)
                .flat_map(|i| [bulk(&format!("f{i}")), bulk("1")])
                .collect(),
        );
        assert_eq!(meta_from_whole(&Ok(wide)).expect("read"), None);
    }
}
