//! The console's checkpoint of a product's books, kept under the product's hash tag so that it
//! lives, fails over and rolls back with the keys it describes. A console starts from it and
//! reads only what happened since, instead of the whole sale.
//!
//! `<prefix>:{A:P}:books`, a hash: `ver` ([`VERSION`]), `pos` (the cut, an event id), `live` (units of live orders
//! at the cut), `since` (the latest order change applied, `updated_at` in µs), `seen_by` (when
//! that was first seen: Redis's clock at that read's cut, ms), `margin_read` (`1` once a read
//! began a feed margin after that: later readers start at `since`), `saved` (ms), `lead` (how
//! far the orders' clock leads Redis's, ms, as learned from orders and their deductions), then
//! `u|<request>` = `<units>|<deduction ms>|<death ms or ->`, then `|s` when the deduction's
//! time is a buyer's (not a console's recording), per unbacked deduction, `v|<request>` =
//! `<units>` per unledgered order (then `|r` when the request's deduction was returned),
//! `m|<request>` = `<deducted>|<ordered>` per order whose quantity is not its deduction's,
//! `e|<request>` = the product of the request's order, for an unbacked deduction whose order is
//! another product's, `o|<request>` = `<units>` per active deduction served outside the sale
//! window, `x|<request>` / `y|<user>` = the value shown per unreadable ledger entry / holding,
//! and `sweep` (`<ledger cursor>|<buyers cursor>`: where the sweep of the two hashes stands). Read in HSCAN pages; written
//! to a key of its own and renamed over the old one, so a reader never sees half of one.

use super::reply::{bytes, pairs};
use super::{Keyed, ProductKeys, RedisStore};
use crate::domain::books::{Books, HashOf, Mismatch, SweepAt, Unbacked};
use crate::domain::events::EventId;
use crate::domain::stock::parse_int;
use chrono::{DateTime, Utc};
use redis::{RedisResult, Value};

/// The COUNT hint of a load's HSCAN: 200 took 1.2-1.6 ms of Redis on a slow machine
/// (footprint benchmark, SLOWLOG), so 100.
const CHUNK: usize = 100;

/// Fields per HSET of a save: 100 took 1.0-1.1 ms of Redis on a slow day (footprint
/// benchmark, 2026-12-03), and SLOWLOG keeps only 32 arguments of a command, so a slow one
/// could not even be replayed to tell a stall from its cost. 15 fields are 32 arguments.
const SAVE_FIELDS: usize = 15;

/// The version of the books a checkpoint holds (its `ver` field). One of an older version is
/// not read: the product is settled from scratch once. Version 2 counts an order whose quantity
/// is not its deduction's as a mismatch (`m|`); a version-1 checkpoint of such a product holds a
/// discrepancy and a stream gap instead, which would have been carried on as `corrupt`. A newer
/// version is read for what this console understands, its other fields left aside: books that
/// then do not balance are settled again by the check every refresh makes, and two console
/// versions side by side no longer throw each other's checkpoints away on every read.
pub const VERSION: u32 = 2;

/// A checkpoint as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub books: Books,
    /// Where the feed of changed orders continues.
    pub feed: Option<Feed>,
    /// When it was saved (the saving console's clock, ms); None when not read
    /// from Redis. [`to_fields`] writes the time of the save it is given instead.
    pub saved_ms: Option<i64>,
    /// How far the orders' clock leads Redis's (ms, negative: behind), as the saving console
    /// learned it from orders and their deductions. A reader that starts from the checkpoint
    /// dates deaths by it: learning it again needs a live order, and after the last one ended
    /// a fresh `status` dated its death seconds early and called it orphaned while the live
    /// view (which had learned it) waited for the return (chaos test, invariant 7).
    pub lead_ms: Option<i64>,
}

/// Where a feed of changed orders stands: the latest change applied (the app servers' clock,
/// as `updated_at` holds it), when that was first seen (Redis's clock at the cut), and whether
/// the margin before it has been read whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feed {
    pub seen: DateTime<Utc>,
    /// When `seen` was first seen, by Redis's clock at that read's cut (the one clock every
    /// console shares; None in a checkpoint saved before the field existed).
    pub seen_by_ms: Option<i64>,
    /// The margin before `seen` has been read whole: a read began at least one margin after
    /// `seen_by_ms`, when every order stamped before `seen` had had its margin to commit.
    pub margin_read: bool,
}

impl Feed {
    /// The feed after seeing a change at `at` (app time) at a read whose cut was at `now_ms`
    /// (Redis's clock).
    pub fn seen(at: DateTime<Utc>, now_ms: i64) -> Self {
        Feed {
            seen: at,
            seen_by_ms: Some(now_ms),
            margin_read: false,
        }
    }

    /// Notes a read whose cut was at `began_ms` (Redis's clock) and that found nothing after
    /// `seen`: once it began a whole margin after `seen` was first seen, every order stamped
    /// before `seen` had its margin to commit, and the margin need not be read again. (A commit
    /// later still is the case the margin never covered: the lookup of unbacked deductions by
    /// request id and the check against the sum of live orders find it.)
    pub fn read_at(&mut self, began_ms: i64, margin: chrono::Duration) {
        if let Some(by) = self.seen_by_ms
            && began_ms >= by.saturating_add(margin.num_milliseconds())
        {
            self.margin_read = true;
        }
    }

    /// Where the next read starts: `margin` before the latest change, however long ago that
    /// was (a commit can land after a later one; an app server's clock can lag). Stamps are
    /// compared with stamps only, never with the console's clock: a database clock behind the
    /// console's, or readers minutes apart, change nothing.
    pub fn from(&self, margin: chrono::Duration) -> DateTime<Utc> {
        if self.margin_read {
            // At `seen` itself: changes stamped alike are applied again, idempotently.
            self.seen
        } else {
            // A stamp read back from Redis may sit at the edge of time (a hash edited by hand):
            // the feed then starts at the earliest instant, which reads every change.
            self.seen
                .checked_sub_signed(margin)
                .unwrap_or(DateTime::<Utc>::MIN_UTC)
        }
    }
}

fn parse_sweep(v: &str) -> Option<SweepAt> {
    let (ledger, buyers) = v.split_once('|')?;
    Some(SweepAt {
        ledger: ledger.parse().ok()?,
        buyers: buyers.parse().ok()?,
    })
}

fn parse_unbacked(v: &str) -> Option<Unbacked> {
    let mut parts = v.split('|');
    let quantity = parse_int(parts.next()?.as_bytes()).filter(|q| *q >= 1)?;
    let at_ms = parts.next()?.parse().ok()?;
    let dead_at_ms = match parts.next()? {
        "-" => None,
        d => Some(d.parse().ok()?),
    };
    // `s` when its time is a buyer's; absent in older checkpoints: not a clock sample then.
    let served = parts.next() == Some("s");
    Some(Unbacked {
        quantity,
        at_ms,
        dead_at_ms,
        served,
    })
}

/// Builds a checkpoint from its fields; None when any does not parse (it is then ignored).
pub fn from_fields(fields: &[(Vec<u8>, Vec<u8>)]) -> Option<Checkpoint> {
    let mut books = Books::default();
    let (mut pos, mut live, mut since) = (None, None, None);
    let (mut seen_by, mut margin_read, mut saved_ms) = (None, false, None);
    let mut version = None;
    let mut lead_ms = None;
    for (k, v) in fields {
        let k = std::str::from_utf8(k).ok()?;
        let v = std::str::from_utf8(v).ok()?;
        match k {
            "ver" => version = v.parse::<u32>().ok(),
            "pos" => pos = Some(EventId::parse(v)?),
            // Figures by the scripts' integer rule: a hash edited by hand cannot overflow a sum.
            "live" => live = Some(parse_int(v.as_bytes())?),
            "disc" => books.discrepancy = parse_int(v.as_bytes())?,
            "gap" => books.stream_gap = v == "1",
            "since" if v.is_empty() => {}
            "since" => since = Some(DateTime::<Utc>::from_timestamp_micros(v.parse().ok()?)?),
            // Written before `seen_by` (a mix of the console's clock and the stamp's): read
            // past, never trusted for `margin_read`.
            "seen_at" => {}
            "seen_by" if v.is_empty() => {}
            "seen_by" => seen_by = Some(v.parse::<i64>().ok()?),
            "margin_read" => margin_read = v == "1",
            "saved" => saved_ms = v.parse::<i64>().ok(),
            "lead" => lead_ms = v.parse::<i64>().ok(),
            "sweep" => books.sweep = parse_sweep(v)?,
            _ => match k.split_once('|') {
                Some(("u", rid)) if !rid.is_empty() => {
                    books.unbacked.insert(rid.to_string(), parse_unbacked(v)?);
                }
                Some(("v", rid)) if !rid.is_empty() => {
                    let (units, after_return) = match v.strip_suffix("|r") {
                        Some(units) => (units, true),
                        None => (v, false),
                    };
                    let q = parse_int(units.as_bytes()).filter(|q| *q >= 1)?;
                    books.unledgered.insert(rid.to_string(), q);
                    if after_return {
                        books.breaches.maps().after_return.insert(rid.to_string());
                    }
                }
                Some(("m", rid)) if !rid.is_empty() => {
                    let (d, o) = v.split_once('|')?;
                    let deducted = parse_int(d.as_bytes()).filter(|q| *q >= 1)?;
                    let ordered = parse_int(o.as_bytes()).filter(|q| *q >= 1)?;
                    books
                        .breaches
                        .maps()
                        .mismatched
                        .insert(rid.to_string(), Mismatch { deducted, ordered });
                }
                Some(("e", rid)) if !rid.is_empty() && !v.is_empty() => {
                    books
                        .breaches
                        .maps()
                        .elsewhere
                        .insert(rid.to_string(), v.to_string());
                }
                Some(("o", rid)) if !rid.is_empty() => {
                    let q = parse_int(v.as_bytes()).filter(|q| *q >= 1)?;
                    books.breaches.maps().outside.insert(rid.to_string(), q);
                }
                Some(("x", rid)) if !rid.is_empty() => {
                    books
                        .bad_entries
                        .insert((HashOf::Ledger, rid.to_string()), v.to_string());
                }
                Some(("y", user)) if !user.is_empty() => {
                    books
                        .bad_entries
                        .insert((HashOf::Buyers, user.to_string()), v.to_string());
                }
                Some(("u" | "v" | "x" | "y" | "m" | "e" | "o", _)) => return None,
                // A field of a newer console: not this one's to read.
                _ => {}
            },
        }
    }
    if version.is_none_or(|v| v < VERSION) {
        return None;
    }
    books.position = pos?;
    books.live_units = live?;
    let feed = since.map(|seen| Feed {
        seen,
        seen_by_ms: seen_by,
        margin_read: margin_read && seen_by.is_some(),
    });
    Some(Checkpoint {
        books,
        feed,
        saved_ms,
        lead_ms,
    })
}

/// The fields of a checkpoint.
pub fn to_fields(c: &Checkpoint, saved_ms: i64) -> Vec<(String, String)> {
    let b = &c.books;
    let mut out = Vec::with_capacity(4 + b.unbacked.len() + b.unledgered.len());
    out.push(("ver".into(), VERSION.to_string()));
    out.push(("pos".into(), b.position.to_string()));
    out.push(("live".into(), b.live_units.to_string()));
    out.push((
        "since".into(),
        c.feed
            .map(|f| f.seen.timestamp_micros().to_string())
            .unwrap_or_default(),
    ));
    out.push((
        "seen_by".into(),
        c.feed
            .and_then(|f| f.seen_by_ms)
            .map(|ms| ms.to_string())
            .unwrap_or_default(),
    ));
    out.push((
        "margin_read".into(),
        if c.feed.is_some_and(|f| f.margin_read) {
            "1"
        } else {
            "0"
        }
        .into(),
    ));
    out.push(("saved".into(), saved_ms.to_string()));
    out.push((
        "lead".into(),
        c.lead_ms.map(|l| l.to_string()).unwrap_or_default(),
    ));
    out.push(("disc".into(), b.discrepancy.to_string()));
    out.push(("gap".into(), if b.stream_gap { "1" } else { "0" }.into()));
    for (rid, u) in &b.unbacked {
        let dead = u
            .dead_at_ms
            .map_or_else(|| "-".to_string(), |d| d.to_string());
        let served = if u.served { "|s" } else { "" };
        out.push((
            format!("u|{rid}"),
            format!("{}|{}|{dead}{served}", u.quantity, u.at_ms),
        ));
    }
    for (rid, q) in &b.unledgered {
        let flag = if b.breaches.after_return(rid) {
            "|r"
        } else {
            ""
        };
        out.push((format!("v|{rid}"), format!("{q}{flag}")));
    }
    for (rid, m) in b.breaches.mismatched() {
        out.push((format!("m|{rid}"), format!("{}|{}", m.deducted, m.ordered)));
    }
    for (rid, product) in b.breaches.elsewhere() {
        out.push((format!("e|{rid}"), product.clone()));
    }
    for (rid, q) in b.breaches.outside() {
        out.push((format!("o|{rid}"), q.to_string()));
    }
    for ((hash, field), shown) in &b.bad_entries {
        let tag = match hash {
            HashOf::Ledger => 'x',
            HashOf::Buyers => 'y',
        };
        out.push((format!("{tag}|{field}"), shown.clone()));
    }
    out.push((
        "sweep".into(),
        format!("{}|{}", b.sweep.ledger, b.sweep.buyers),
    ));
    out
}

fn hscan(k: &ProductKeys, cursor: u64) -> Keyed {
    Keyed::new(
        &k.books,
        redis::cmd("HSCAN")
            .arg(&k.books)
            .arg(cursor)
            .arg("COUNT")
            .arg(CHUNK)
            .clone(),
    )
}

/// Field/value pairs of a hash.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// One HSCAN reply: the next cursor and the fields; None for a key of another type.
fn scanned(r: RedisResult<Value>) -> RedisResult<Option<(u64, Fields)>> {
    let v = match r {
        Ok(v) => v,
        Err(e) if super::reply::is_wrong_type(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Value::Array(parts) = v else {
        return Ok(None);
    };
    let cursor = parts
        .first()
        .and_then(bytes)
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(Some((cursor, parts.get(1).map(pairs).unwrap_or_default())))
}

/// The fields that say where the feed of changed orders stands (the rest are the books).
const FEED_FIELDS: [&str; 4] = ["since", "seen_by", "margin_read", "lead"];

/// What a save of `c` with expiry `expire_at` would write, as two numbers: the books' fields
/// and the feed's (the time of the save left out). Equal numbers, the same fields: a reader
/// that changed nothing compares them with the checkpoint's and writes nothing. The fields'
/// hashes are added, so their order (the books' maps) does not matter.
pub fn digest(c: &Checkpoint, expire_at: Option<i64>) -> Digest {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let hasher = BuildHasherDefault::<DefaultHasher>::default();
    let mut d = Digest {
        books: hasher.hash_one(expire_at),
        feed: 0,
    };
    for field in to_fields(c, 0).iter().filter(|(f, _)| f != "saved") {
        let sum = if FEED_FIELDS.contains(&field.0.as_str()) {
            &mut d.feed
        } else {
            &mut d.books
        };
        *sum = sum.wrapping_add(hasher.hash_one(field));
    }
    d
}

/// A checkpoint's [`digest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Digest {
    pub books: u64,
    pub feed: u64,
}

/// Reads the checkpoint of each `(product, the position its cut read, if any)` and keeps
/// those still valid: the event they stand at is in the stream (a stream rolled back past it, or lost, makes it useless). The first
/// HSCAN page of every product goes in one pipeline; bigger checkpoints are read on, page by
/// page.
pub async fn load_many(
    redis: &RedisStore,
    keys: &[(&ProductKeys, Option<EventId>)],
) -> RedisResult<Vec<Option<Checkpoint>>> {
    // A window at a time, as the cut reads them: the replies of every checkpoint at once
    // would be held together.
    super::cut::windowed(keys, |window| load_window(redis, window)).await
}

async fn load_window(
    redis: &RedisStore,
    keys: &[(&ProductKeys, Option<EventId>)],
) -> RedisResult<Vec<Option<Checkpoint>>> {
    let first = redis
        .pipeline(keys.iter().map(|(k, _)| hscan(k, 0)).collect())
        .await;
    let mut parsed: Vec<Option<Checkpoint>> = Vec::with_capacity(keys.len());
    for ((k, _), r) in keys.iter().zip(first) {
        let Some((mut cursor, mut fields)) = scanned(r)? else {
            parsed.push(None);
            continue;
        };
        while cursor != 0 {
            let r = redis.pipeline(vec![hscan(k, cursor)]).await.pop();
            let Some((next, more)) = scanned(r.unwrap_or(Ok(Value::Nil)))? else {
                break;
            };
            fields.extend(more);
            cursor = next;
        }
        // HSCAN may repeat a field; every value is the one write's.
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        fields.dedup_by(|a, b| a.0 == b.0);
        parsed.push(from_fields(&fields).filter(|c| c.books.position != EventId::ZERO));
    }
    // Whether the event each stands at is still in its stream: asked, unless the caller's
    // cut just read it as the newest.
    let asked: Vec<usize> = (0..keys.len())
        .filter(|&i| {
            parsed[i]
                .as_ref()
                .is_some_and(|c| keys[i].1 != Some(c.books.position))
        })
        .collect();
    let asks: Vec<(&ProductKeys, EventId)> = asked
        .iter()
        .filter_map(|&i| Some((keys[i].0, parsed[i].as_ref()?.books.position)))
        .collect();
    for (&i, found) in asked
        .iter()
        .zip(super::events::exist_many(redis, &asks).await)
    {
        if !found? {
            parsed[i] = None;
        }
    }
    Ok(parsed)
}

/// Writes each product's checkpoint: into a key of this save's own, then renamed over the
/// old one (a reader sees the old or the new, never a mix), with the product's expiry.
pub async fn save_many(
    redis: &RedisStore,
    saves: &[(&ProductKeys, Checkpoint, Option<i64>)],
) -> RedisResult<()> {
    let now = Utc::now().timestamp_millis();
    let nonce = crate::domain::token::unique();
    let mut fill: Vec<Keyed> = Vec::new();
    let mut swap: Vec<Keyed> = Vec::new();
    let mut expire: Vec<Keyed> = Vec::new();
    for (k, c, expire_at) in saves {
        let tmp = format!("{}-{nonce}", k.books);
        for chunk in to_fields(c, now).chunks(SAVE_FIELDS) {
            let mut cmd = redis::cmd("HSET");
            cmd.arg(&tmp);
            for (f, v) in chunk {
                cmd.arg(f).arg(v);
            }
            fill.push(Keyed::new(&tmp, cmd));
        }
        // A save that stops half way leaves nothing behind for long.
        fill.push(Keyed::new(
            &tmp,
            redis::cmd("PEXPIRE").arg(&tmp).arg(60_000).clone(),
        ));
        swap.push(Keyed::new(
            &tmp,
            redis::cmd("RENAME").arg(&tmp).arg(&k.books).clone(),
        ));
        expire.push(Keyed::new(
            &k.books,
            match expire_at {
                Some(t) => redis::cmd("PEXPIREAT").arg(&k.books).arg(t).clone(),
                None => redis::cmd("PERSIST").arg(&k.books).clone(),
            },
        ));
    }
    for r in redis.pipeline(fill).await {
        r?;
    }
    // Each step only once the one before is done: the pipelines of one node may be sent
    // concurrently.
    for step in [swap, expire] {
        for r in redis.pipeline(step).await {
            r?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feed_stamped_at_the_edge_of_time_starts_at_the_earliest_instant() {
        let fields: Vec<(Vec<u8>, Vec<u8>)> = [
            ("ver", VERSION.to_string()),
            ("pos", "7-2".to_string()),
            ("live", "0".to_string()),
            (
                "since",
                DateTime::<Utc>::MIN_UTC.timestamp_micros().to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.into_bytes()))
        .collect();
        let feed = from_fields(&fields)
            .and_then(|c| c.feed)
            .expect("a checkpoint with a feed");
        assert_eq!(
            feed.from(chrono::Duration::seconds(2)),
            DateTime::<Utc>::MIN_UTC
        );
    }

    #[test]
    fn a_checkpoint_round_trips() {
        let mut books = Books {
            position: EventId { ms: 7, seq: 2 },
            live_units: 41,
            ..Books::default()
        };
        books.unbacked.insert(
            "fly|1".into(),
            Unbacked {
                quantity: 2,
                at_ms: 5,
                dead_at_ms: None,
                served: true,
            },
        );
        books.unbacked.insert(
            "gone".into(),
            Unbacked {
                quantity: 1,
                at_ms: 3,
                dead_at_ms: Some(6),
                served: false,
            },
        );
        books.unledgered.insert("lost".into(), 3);
        // What app servers did against the contract rides along.
        books.unledgered.insert("again|r".into(), 2);
        books.breaches.maps().after_return.insert("again|r".into());
        books.breaches.maps().mismatched.insert(
            "more".into(),
            Mismatch {
                deducted: 1,
                ordered: 3,
            },
        );
        books
            .breaches
            .maps()
            .elsewhere
            .insert("gone".into(), "p-2".into());
        books.breaches.maps().outside.insert("late".into(), 4);
        books.note_bad_entry(HashOf::Ledger, "junk|1", b"gar|bage");
        books.note_bad_entry(HashOf::Buyers, "u|2", b"01");
        books.sweep = SweepAt {
            ledger: 0,
            buyers: 17,
        };
        books.discrepancy = -2;
        books.stream_gap = true;
        let c = Checkpoint {
            books,
            feed: Some(Feed {
                seen: DateTime::<Utc>::from_timestamp_micros(1_700_000_000_123_456).expect("time"),
                seen_by_ms: Some(1_700_000_001_500),
                margin_read: true,
            }),
            saved_ms: Some(9),
            lead_ms: Some(-4_354),
        };
        let fields: Vec<(Vec<u8>, Vec<u8>)> = to_fields(&c, 9)
            .into_iter()
            .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
            .collect();
        assert_eq!(from_fields(&fields).as_ref(), Some(&c));
        // A checkpoint of another version (the books before mismatches were counted apart)
        // is not read.
        let old: Vec<(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .filter(|(k, _)| k.as_slice() != b"ver")
            .cloned()
            .collect();
        assert_eq!(from_fields(&old), None);
        // A newer console's field is left aside; the rest is read.
        let mut newer = fields.clone();
        newer.push((b"z|future".to_vec(), b"anything".to_vec()));
        newer.push((b"ver".to_vec(), b"3".to_vec()));
        assert_eq!(from_fields(&newer).map(|c| c.books), Some(c.books.clone()));
        // Anything unreadable makes the whole checkpoint unusable, not half of it.
        let mut bad = fields.clone();
        bad.push((b"u|x".to_vec(), b"1|oops|-".to_vec()));
        assert_eq!(from_fields(&bad), None);
        let no_pos: Vec<(Vec<u8>, Vec<u8>)> = fields
            .iter()
            .filter(|(k, _)| k.as_slice() != b"pos")
            .cloned()
            .collect();
        assert_eq!(from_fields(&no_pos), None);
        // Numbers past the scripts' integer rule cannot be summed into an overflow.
        let mut huge = fields.clone();
        huge.push((b"v|big".to_vec(), b"99999999999999999999".to_vec()));
        assert_eq!(from_fields(&huge), None);
    }

    #[test]
    fn the_margin_is_read_again_until_a_read_comes_a_whole_margin_after_the_latest_change() {
        let seen = DateTime::<Utc>::from_timestamp_micros(1_700_000_000_000_000).expect("time");
        let margin = chrono::Duration::seconds(2);
        let mut f = Feed::seen(seen, 5_000);
        assert_eq!(f.from(margin), seen - margin);
        f.read_at(6_999, margin);
        assert!(
            !f.margin_read,
            "a read 1.999 s after the change saw it first"
        );
        assert_eq!(f.from(margin), seen - margin);
        f.read_at(7_000, margin);
        assert_eq!(
            f.from(margin),
            seen,
            "read whole: the next read starts at the change"
        );
        // A checkpoint saved before `seen_by` existed never skips its margin.
        let mut old = Feed {
            seen_by_ms: None,
            ..Feed::seen(seen, 5_000)
        };
        old.read_at(i64::MAX, margin);
        assert_eq!(old.from(margin), seen - margin);
    }
}
