//! Unreadable entries of a product's ledger (not a ledger record) and buyers hash (not an
//! integer). The scripts refuse the request or buyer such an entry belongs to, with nothing
//! written; the console finds them where it reads these hashes anyway (the settle's ledger
//! pages, the lookups of the requests it tracks) and in a sweep of a few HSCAN pages per
//! refresh, so that the whole of both hashes is read over time at a cost that does not grow
//! with the sale. What it has found is read again on every refresh, until it is gone.

use crate::domain::books::{Books, HashOf};
use crate::domain::stock::{LedgerEntry, parse_int};
use crate::redis::ledger::PLACEHOLDER;
use crate::redis::reply::{bytes, is_wrong_type, pairs};
use crate::redis::{Keyed, ProductKeys, RedisStore};
use redis::{RedisResult, Value};

/// Whether `raw` is what the scripts accept in `hash` (for `field`).
fn readable(hash: HashOf, field: &str, raw: &[u8]) -> bool {
    match hash {
        HashOf::Ledger => LedgerEntry::parse(field, raw).is_some(),
        HashOf::Buyers => parse_int(raw).is_some(),
    }
}

fn key_of(k: &ProductKeys, hash: HashOf) -> &str {
    match hash {
        HashOf::Ledger => &k.ledger,
        HashOf::Buyers => &k.buyers,
    }
}

/// Reads again what each product's books hold as unreadable, and drops what was repaired or
/// deleted since: one HMGET per product and hash that has any, pipelined.
pub async fn recheck(
    redis: &RedisStore,
    items: &mut [(&ProductKeys, &mut Books)],
) -> RedisResult<()> {
    let mut asks: Vec<(usize, HashOf, Vec<String>)> = Vec::new();
    for (i, (_, books)) in items.iter().enumerate() {
        for hash in [HashOf::Ledger, HashOf::Buyers] {
            let fields: Vec<String> = books
                .bad_entries
                .keys()
                .filter(|(h, _)| *h == hash)
                .map(|(_, f)| f.clone())
                .collect();
            if !fields.is_empty() {
                asks.push((i, hash, fields));
            }
        }
    }
    if asks.is_empty() {
        return Ok(());
    }
    let cmds: Vec<Keyed> = asks
        .iter()
        .map(|(i, hash, fields)| {
            let key = key_of(items[*i].0, *hash);
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(key).arg(fields);
            Keyed::new(key, cmd)
        })
        .collect();
    let replies = redis.pipeline(cmds).await;
    for ((i, hash, fields), reply) in asks.into_iter().zip(replies) {
        let values = match reply {
            Ok(Value::Array(values)) => values,
            // The key now has another type: the cut reports the key itself.
            Err(e) if is_wrong_type(&e) => Vec::new(),
            Ok(_) => Vec::new(),
            Err(e) => return Err(e),
        };
        let books = &mut items[i].1;
        books.bad_entries.retain(|(h, _), _| *h != hash);
        for (field, v) in fields.iter().zip(&values) {
            if let Some(raw) = bytes(v)
                && !readable(hash, field, &raw)
            {
                books.note_bad_entry(hash, field, &raw);
            }
        }
    }
    Ok(())
}

/// How much one sweep reads: a page of `count` entries (HSCAN's COUNT hint) of the ledger and
/// of the buyers hash of `products` products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepBudget {
    pub products: usize,
    pub count: usize,
}

/// Reads the next sweep page of the ledger and of the buyers hash of up to `budget.products`
/// products, starting at the `start`-th (round robin over calls), pipelined; returns where the
/// next call starts.
pub async fn sweep(
    redis: &RedisStore,
    items: &mut [(&ProductKeys, &mut Books)],
    start: usize,
    budget: SweepBudget,
) -> RedisResult<usize> {
    let SweepBudget {
        products: budget,
        count,
    } = budget;
    let n = items.len();
    if n == 0 || budget == 0 {
        return Ok(start);
    }
    let chosen: Vec<(usize, HashOf)> = (0..budget.min(n))
        .map(|j| (start + j) % n)
        .flat_map(|i| [(i, HashOf::Ledger), (i, HashOf::Buyers)])
        .collect();
    let cmds: Vec<Keyed> = chosen
        .iter()
        .map(|&(i, hash)| {
            let (k, books) = &items[i];
            let key = key_of(k, hash);
            let cmd = redis::cmd("HSCAN")
                .arg(key)
                .arg(books.sweep.cursor(hash))
                .arg("COUNT")
                .arg(count)
                .clone();
            Keyed::new(key, cmd)
        })
        .collect();
    let replies = redis.pipeline(cmds).await;
    for (&(i, hash), reply) in chosen.iter().zip(replies) {
        let books = &mut items[i].1;
        let parts = match reply {
            Ok(Value::Array(parts)) => parts,
            // Another type (the cut reports the key) or an odd reply: start over next time.
            Err(e) if is_wrong_type(&e) => Vec::new(),
            Ok(_) => Vec::new(),
            Err(e) => return Err(e),
        };
        let next = parts
            .first()
            .and_then(bytes)
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        for (field, value) in parts.get(1).map(pairs).unwrap_or_default() {
            if field == PLACEHOLDER {
                continue;
            }
            let field = String::from_utf8_lossy(&field);
            if !readable(hash, &field, &value) {
                books.note_bad_entry(hash, &field, &value);
            }
        }
        books.sweep.set(hash, next);
    }
    Ok((start + budget.min(n)) % n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_by_the_rules_of_their_hash() {
        assert!(readable(HashOf::Ledger, "r", b"d|1|5-0|9|u"));
        assert!(!readable(HashOf::Ledger, "r", b"garbage"));
        assert!(readable(HashOf::Buyers, "u", b"2"));
        for bad in ["01", "-0", "+2", "2 ", "x", ""] {
            assert!(!readable(HashOf::Buyers, "u", bad.as_bytes()), "{bad:?}");
        }
    }
}
