//! Reads of a product's ledger, never whole: entries of given request ids (HMGET, at most
//! [`LOOKUP`] fields per command), or one HSCAN page at a time.

use super::reply::{bytes, is_wrong_type, pairs};
use super::{Keyed, ProductKeys, RedisStore};
use crate::domain::stock::LedgerEntry;
use redis::{RedisResult, Value};

/// Fields per HMGET: 30, so that the command has 32 arguments and SLOWLOG keeps it whole: a slow
/// one can be replayed to tell Redis's work from a stall (HMGETs of 100 fields, about 0.13 ms
/// each on a ledger of a million entries, were logged cut and could not be). A lookup pipelines
/// its HMGETs, so the smaller commands cost a little more of Redis's per-command overhead and no
/// round trip.
pub const LOOKUP: usize = 30;

/// The COUNT hint of HSCAN: 100 entries take about 0.1 ms (200 took up to 1.1 ms on a loaded
/// machine, 1,000 took 0.9 ms on a quiet one).
pub const SCAN_COUNT: usize = 100;

/// The placeholder field preheat writes so the hash exists (and keeps its expiry) before the
/// first deduction; no request id is empty, so it is never an entry.
pub const PLACEHOLDER: &[u8] = b"";

/// What the ledger holds for one request id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Absent,
    Entry(LedgerEntry),
    /// A value that is not a ledger record (shown, not trusted).
    Corrupt(Vec<u8>),
}

impl Lookup {
    pub fn entry(&self) -> Option<&LedgerEntry> {
        match self {
            Lookup::Entry(e) => Some(e),
            _ => None,
        }
    }

    pub fn into_entry(self) -> Option<LedgerEntry> {
        match self {
            Lookup::Entry(e) => Some(e),
            _ => None,
        }
    }
}

fn lookup_from(rid: &str, v: &Value) -> Lookup {
    match bytes(v) {
        None => Lookup::Absent,
        Some(raw) => match LedgerEntry::parse(rid, &raw) {
            Some(e) => Lookup::Entry(e),
            None => Lookup::Corrupt(raw),
        },
    }
}

/// The entries of `rids` in the ledgers of their products: one HMGET per product and chunk,
/// pipelined per node. A ledger of the wrong type answers `Absent` for each (the cut reports
/// the key itself).
pub async fn lookup_many(
    redis: &RedisStore,
    asks: &[(&ProductKeys, Vec<&str>)],
) -> RedisResult<Vec<Vec<Lookup>>> {
    let mut items = Vec::new();
    let mut shape = Vec::new();
    for (i, (k, rids)) in asks.iter().enumerate() {
        for chunk in rids.chunks(LOOKUP) {
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(&k.ledger).arg(chunk);
            items.push(Keyed::new(&k.ledger, cmd));
            shape.push((i, chunk));
        }
    }
    let mut out: Vec<Vec<Lookup>> = asks
        .iter()
        .map(|(_, r)| Vec::with_capacity(r.len()))
        .collect();
    for ((i, chunk), r) in shape.into_iter().zip(redis.pipeline(items).await) {
        match r {
            Ok(Value::Array(values)) => {
                out[i].extend(
                    chunk
                        .iter()
                        .zip(&values)
                        .map(|(rid, v)| lookup_from(rid, v)),
                );
            }
            Ok(_) => out[i].extend(chunk.iter().map(|_| Lookup::Absent)),
            Err(e) if is_wrong_type(&e) => out[i].extend(chunk.iter().map(|_| Lookup::Absent)),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// One HSCAN page of a product's ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanPage {
    /// The cursor of the next page; 0 when this was the last.
    pub next: u64,
    pub entries: Vec<LedgerEntry>,
    /// Fields whose value is not a ledger record.
    pub corrupt: Vec<(String, Vec<u8>)>,
    /// The key has another type.
    pub wrong_type: bool,
}

/// One page of `HSCAN ledger cursor COUNT <SCAN_COUNT>`. HSCAN may repeat an entry across pages;
/// callers keep what they counted by request id.
pub async fn scan_page(redis: &RedisStore, k: &ProductKeys, cursor: u64) -> RedisResult<ScanPage> {
    let cmd = redis::cmd("HSCAN")
        .arg(&k.ledger)
        .arg(cursor)
        .arg("COUNT")
        .arg(SCAN_COUNT)
        .clone();
    let v = match redis.query(&k.ledger, &cmd).await {
        Ok(v) => v,
        Err(e) if is_wrong_type(&e) => {
            return Ok(ScanPage {
                wrong_type: true,
                ..ScanPage::default()
            });
        }
        Err(e) => return Err(e),
    };
    let Value::Array(parts) = v else {
        return Ok(ScanPage::default());
    };
    let next = parts
        .first()
        .and_then(bytes)
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut page = ScanPage {
        next,
        ..ScanPage::default()
    };
    for (field, value) in parts.get(1).map(pairs).unwrap_or_default() {
        if field == PLACEHOLDER {
            continue;
        }
        let rid = String::from_utf8_lossy(&field).into_owned();
        match LedgerEntry::parse(&rid, &value) {
            Some(e) => page.entries.push(e),
            None => page.corrupt.push((rid, value)),
        }
    }
    Ok(page)
}

/// What a whole ledger holds as active, read in HSCAN pages (for a dry run's check and a
/// counter rebuild; never on a path a live view runs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ActiveUnits {
    /// Units of entries deducted and not returned.
    pub units: i64,
    /// Values that are not ledger records.
    pub corrupt: usize,
    /// The key has another type.
    pub wrong_type: bool,
}

/// Sums the active entries of one ledger, page by page (HSCAN may repeat an entry, so entries
/// are counted by request id).
pub async fn active_units(redis: &RedisStore, k: &ProductKeys) -> RedisResult<ActiveUnits> {
    let mut seen: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    let mut corrupt: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut cursor = 0;
    loop {
        let page = scan_page(redis, k, cursor).await?;
        for e in page.entries {
            seen.insert(e.request_id, if e.returned { 0 } else { e.quantity });
        }
        corrupt.extend(page.corrupt.into_iter().map(|(rid, _)| rid));
        if page.next == 0 || page.wrong_type {
            return Ok(ActiveUnits {
                units: seen.values().sum(),
                corrupt: corrupt.len(),
                wrong_type: page.wrong_type,
            });
        }
        cursor = page.next;
    }
}

/// What a whole ledger holds, read in HSCAN pages (a rebuild's reckoning; never on a path a
/// live view runs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerTotals {
    /// Units of entries deducted and not returned.
    pub active: i64,
    /// Those units per user (the user exactly as the ledger holds it).
    pub per_user: std::collections::HashMap<Vec<u8>, i64>,
    /// Fields whose value is not a ledger record, and the value.
    pub unreadable: Vec<(String, Vec<u8>)>,
    /// The key has another type.
    pub wrong_type: bool,
}

/// Reads a whole ledger, page by page (HSCAN may repeat an entry, so entries are counted by
/// request id).
pub async fn totals(redis: &RedisStore, k: &ProductKeys) -> RedisResult<LedgerTotals> {
    let mut seen: std::collections::HashMap<String, (Vec<u8>, i64)> =
        std::collections::HashMap::new();
    let mut unreadable: std::collections::HashMap<String, Vec<u8>> =
        std::collections::HashMap::new();
    let mut cursor = 0;
    loop {
        let page = scan_page(redis, k, cursor).await?;
        for e in page.entries {
            let units = if e.returned { 0 } else { e.quantity };
            seen.insert(e.request_id, (e.user_raw, units));
        }
        unreadable.extend(page.corrupt);
        if page.next == 0 || page.wrong_type {
            let mut out = LedgerTotals {
                wrong_type: page.wrong_type,
                unreadable: unreadable.into_iter().collect(),
                ..LedgerTotals::default()
            };
            for (user, units) in seen.into_values().filter(|(_, u)| *u > 0) {
                out.active = out.active.saturating_add(units);
                let held = out.per_user.entry(user).or_insert(0);
                *held = held.saturating_add(units);
            }
            return Ok(out);
        }
        cursor = page.next;
    }
}

/// Every holding of a product's buyers hash (the placeholder left out), read in HSCAN pages (a
/// rebuild's reckoning; never on a path a live view runs). A holding that is not an integer is
/// None.
pub async fn holdings(
    redis: &RedisStore,
    k: &ProductKeys,
) -> RedisResult<std::collections::HashMap<Vec<u8>, Option<i64>>> {
    let mut out = std::collections::HashMap::new();
    let mut cursor: u64 = 0;
    loop {
        let cmd = redis::cmd("HSCAN")
            .arg(&k.buyers)
            .arg(cursor)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .clone();
        let v = match redis.query(&k.buyers, &cmd).await {
            Ok(v) => v,
            Err(e) if is_wrong_type(&e) => return Ok(out),
            Err(e) => return Err(e),
        };
        let Value::Array(parts) = v else {
            return Ok(out);
        };
        cursor = parts
            .first()
            .and_then(bytes)
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        for (user, units) in parts.get(1).map(pairs).unwrap_or_default() {
            if user != PLACEHOLDER {
                out.insert(user, crate::domain::stock::parse_int(&units));
            }
        }
        if cursor == 0 {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_tell_absent_entry_and_corrupt_apart() {
        assert_eq!(lookup_from("r", &Value::Nil), Lookup::Absent);
        let e = lookup_from("r", &Value::BulkString(b"d|1|5-0|9|u".to_vec()));
        assert_eq!(e.entry().map(|e| e.quantity), Some(1));
        assert_eq!(
            lookup_from("r", &Value::BulkString(b"junk".to_vec())),
            Lookup::Corrupt(b"junk".to_vec())
        );
    }
}
