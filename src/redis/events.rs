//! Reads of a product's event stream, always in bounded pages (XRANGE / XREVRANGE with COUNT):
//! the stream grows with the sale, a page does not.

use super::reply::{pairs, text};
use super::{Keyed, ProductKeys, RedisStore};
use crate::domain::events::{Event, EventId, EventKind};
use redis::{RedisResult, Value};

/// Events per page: a page of 200 takes Redis about 0.1 ms. Pages of 500 took about 0.2 ms on a
/// quiet machine but up to 5.6 ms on a loaded one (footprint benchmark, SLOWLOG), and a command
/// may not cost 1 ms at peak; a cold settle pays the extra round trips once.
pub const PAGE: usize = 200;

/// Entries the pages of one pipeline may ask for together. A page costs little, but a pipeline
/// of 2,000 pages of 201 entries (a cold settle of a big sale) was about 0.2 s of Redis and 30
/// MB of reply a chunk, three chunks in flight: the last one answered near the 1 s response
/// timeout on an idle server and past it on a loaded one. 20,000 entries are about 10 ms of
/// Redis and 1.5 MB.
const ENTRIES_PER_PIPELINE: usize = 20_000;

/// Pipelines of page reads in flight at once: one is read while Redis answers the next.
const PIPELINES_IN_FLIGHT: usize = 2;

/// How many page reads of `count` entries go in one pipeline (at least one).
fn pages_per_pipeline(count: usize) -> usize {
    (ENTRIES_PER_PIPELINE / count.max(1)).max(1)
}

/// Sends page reads of `count` entries each in pipelines of [`pages_per_pipeline`], a few in
/// flight; the replies in the items' order, each page answering for itself (`cut::windowed`,
/// the same windows for whole reads, ends at the first error instead).
async fn paged(redis: &RedisStore, items: Vec<Keyed>, count: usize) -> Vec<RedisResult<Value>> {
    use futures::StreamExt;
    let per = pages_per_pipeline(count);
    let mut groups: Vec<Vec<Keyed>> = Vec::with_capacity(items.len().div_ceil(per));
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        groups.push(items.by_ref().take(per).collect());
    }
    futures::stream::iter(groups.into_iter().map(|g| redis.pipeline(g)))
        .buffered(PIPELINES_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// One page of events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub events: Vec<Event>,
    /// The page was full: more may follow.
    pub more: bool,
    /// Entries that did not parse (skipped).
    pub bad: usize,
    /// The id of the page's last entry, parsed or not (where the next page starts).
    pub last: Option<EventId>,
}

/// Parses an XRANGE / XREVRANGE reply.
pub fn parse_page(reply: &Value, count: usize) -> Page {
    let Value::Array(entries) = reply else {
        return Page::default();
    };
    let mut page = parse_entries(entries);
    page.more = entries.len() >= count;
    page
}

/// Parses a reply asked with COUNT `count + 1`: the extra entry only says that more follow (the
/// next page begins with it). A backward page asked for exactly `count` that came back full had
/// to ask once more to learn that nothing followed, and a page asked before a stream's first
/// entry makes Redis 7.0 walk the whole stream from its end (it finds no node at or before the
/// page's end and starts from the last one): 80 to 90 ms of Redis on a million events, once a
/// cold settle of a stream whose length is a multiple of the page (footprint benchmark,
/// 2026-12-04).
pub fn parse_page_peeking(reply: &Value, count: usize) -> Page {
    let Value::Array(entries) = reply else {
        return Page::default();
    };
    let mut page = parse_entries(&entries[..entries.len().min(count)]);
    page.more = entries.len() > count;
    page
}

fn parse_entries(entries: &[Value]) -> Page {
    let mut page = Page::default();
    for entry in entries {
        let parsed = match entry {
            Value::Array(parts) => match parts.as_slice() {
                [id, fields] => text(id).and_then(|id| {
                    if let Some(at) = EventId::parse(&id) {
                        page.last = Some(at);
                    }
                    Event::from_fields(&id, &pairs(fields))
                }),
                _ => None,
            },
            _ => None,
        };
        match parsed {
            Some(e) => page.events.push(e),
            None => page.bad += 1,
        }
    }
    page
}

/// The last event's id (ZERO for an empty or absent stream), from `XREVRANGE key + - COUNT 1`.
pub fn last_id(reply: &Value) -> Option<EventId> {
    match reply {
        Value::Array(entries) => match entries.first() {
            None => Some(EventId::ZERO),
            Some(Value::Array(parts)) => parts
                .first()
                .and_then(text)
                .and_then(|t| EventId::parse(&t)),
            Some(_) => None,
        },
        Value::Nil => Some(EventId::ZERO),
        _ => None,
    }
}

/// `XREVRANGE events + - COUNT 1`: the newest event.
pub fn newest(k: &ProductKeys) -> Keyed {
    newest_page(k, 1)
}

/// `XREVRANGE events + - COUNT count`: the newest events, newest first.
pub fn newest_page(k: &ProductKeys, count: usize) -> Keyed {
    Keyed::new(
        &k.events,
        redis::cmd("XREVRANGE")
            .arg(&k.events)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(count)
            .clone(),
    )
}

fn after_cmd(k: &ProductKeys, after: EventId, count: usize) -> Keyed {
    Keyed::new(
        &k.events,
        redis::cmd("XRANGE")
            .arg(&k.events)
            .arg(after.exclusive())
            .arg("+")
            .arg("COUNT")
            .arg(count)
            .clone(),
    )
}

/// For each `(keys, position)`, the events strictly after the position, oldest first, one
/// page each; pipelined per node.
pub async fn after_many(
    redis: &RedisStore,
    from: &[(&ProductKeys, EventId)],
    count: usize,
) -> Vec<RedisResult<Page>> {
    let items = from
        .iter()
        .map(|(k, at)| after_cmd(k, *at, count))
        .collect();
    paged(redis, items, count)
        .await
        .into_iter()
        .map(|r| r.map(|v| parse_page(&v, count)))
        .collect()
}

/// Every event of one product strictly after `after`, page by page (what happened since a
/// cut: bounded by the time since, not by the sale).
pub async fn all_after(
    redis: &RedisStore,
    k: &ProductKeys,
    mut after: EventId,
) -> RedisResult<Vec<Event>> {
    let mut out = Vec::new();
    loop {
        let page = redis
            .pipeline(vec![after_cmd(k, after, PAGE)])
            .await
            .pop()
            .unwrap_or_else(|| Ok(Value::Nil))
            .map(|v| parse_page(&v, PAGE))?;
        let Some(last) = page.last else {
            return Ok(out);
        };
        let more = page.more;
        out.extend(page.events);
        if !more {
            return Ok(out);
        }
        after = last;
    }
}

/// Of the request ids `asks`, those whose units the scripts' counters hold by the stream's
/// word up to `until` (the position read before anything was written): their last deduction
/// or booking (`d`, `b`) is not followed by a return (`r`). Read whole in pages: a rebuild's
/// question, asked only for live orders the ledger lacked. None when the key is not a stream,
/// or when a rebuild's marker (`g`) comes after the last word on one of `asks`: the counters
/// at a marker were set from the ledger, not from the events before it (a stream rebuilt after
/// it was lost starts at its marker, with none of the sales before), so the stream's silence
/// on a request says nothing of it then.
///
/// `silence` says whether the caller takes a request the stream does not name as one the
/// counters never held (a rebuild counting what the counters lack: then a marker after the last
/// word on any of them voids the answer); a caller that acts only on the requests named
/// standing (a heal claiming units a rebuild held back for them) passes false: a deduction
/// named before a marker still stands, and a rebuild held back its units.
pub async fn standing(
    redis: &RedisStore,
    k: &ProductKeys,
    (asks, silence): (&std::collections::HashSet<&str>, bool),
    until: EventId,
) -> RedisResult<Option<std::collections::HashSet<String>>> {
    let mut held = std::collections::HashSet::new();
    // The requests the stream names after its last rebuild marker, once it has one.
    let mut since_marker: Option<std::collections::HashSet<String>> = None;
    let stream = each_page_until(redis, k, until, |events| {
        for e in events {
            if e.kind == EventKind::Rebuilt {
                since_marker = Some(std::collections::HashSet::new());
                continue;
            }
            if !asks.contains(e.request_id.as_str()) {
                continue;
            }
            if let Some(named) = &mut since_marker {
                named.insert(e.request_id.clone());
            }
            match e.kind {
                EventKind::Deducted | EventKind::Booked => {
                    held.insert(e.request_id.clone());
                }
                EventKind::Returned => {
                    held.remove(&e.request_id);
                }
                _ => {}
            }
        }
    })
    .await?;
    if !stream {
        return Ok(None);
    }
    match since_marker {
        Some(named) if silence && asks.iter().any(|r| !named.contains(*r)) => Ok(None),
        _ => Ok(Some(held)),
    }
}

/// The units the stream holds active since its last rebuild marker, up to `until`: deductions
/// and bookings after the marker less the returns after it (never below 0). None without a
/// marker (or a stream of another type). The counters at the cut are the marker's plus these:
/// what they hold beyond these came before the marker.
pub async fn units_since_marker(
    redis: &RedisStore,
    k: &ProductKeys,
    until: EventId,
) -> RedisResult<Option<i64>> {
    let mut units: Option<i64> = None;
    let stream = each_page_until(redis, k, until, |events| {
        for e in events {
            match (e.kind, units.as_mut()) {
                (EventKind::Rebuilt, _) => units = Some(0),
                (EventKind::Deducted | EventKind::Booked, Some(n)) => {
                    *n = n.saturating_add(e.quantity);
                }
                (EventKind::Returned, Some(n)) => *n = n.saturating_sub(e.quantity),
                _ => {}
            }
        }
    })
    .await?;
    Ok(units.filter(|_| stream).map(|n| n.max(0)))
}

/// Every event of the stream from its start up to `until`, oldest first, handed to `visit` a
/// page at a time (the whole history is read, never held). False when the key is not a stream.
async fn each_page_until(
    redis: &RedisStore,
    k: &ProductKeys,
    until: EventId,
    mut visit: impl FnMut(&[Event]),
) -> RedisResult<bool> {
    let mut after = EventId::ZERO;
    loop {
        let page = Keyed::new(
            &k.events,
            redis::cmd("XRANGE")
                .arg(&k.events)
                .arg(after.exclusive())
                .arg(until.to_string())
                .arg("COUNT")
                .arg(PAGE)
                .clone(),
        );
        let reply = redis
            .pipeline(vec![page])
            .await
            .pop()
            .unwrap_or_else(|| Ok(Value::Nil));
        let page = match reply {
            Ok(v) => parse_page(&v, PAGE),
            Err(e) if super::reply::is_wrong_type(&e) => return Ok(false),
            Err(e) => return Err(e),
        };
        visit(&page.events);
        match page.last {
            Some(last) if page.more => after = last,
            _ => return Ok(true),
        }
    }
}

/// For each `(keys, id)`, the entry `id` of the product's stream (`XRANGE id id COUNT 1`),
/// pipelined per node: an empty reply when the stream no longer holds it; a stream of another
/// type holds nothing.
async fn entries_at(
    redis: &RedisStore,
    asks: &[(&ProductKeys, EventId)],
) -> Vec<RedisResult<Value>> {
    let items = asks
        .iter()
        .map(|(k, id)| {
            let at = id.to_string();
            Keyed::new(
                &k.events,
                redis::cmd("XRANGE")
                    .arg(&k.events)
                    .arg(&at)
                    .arg(&at)
                    .arg("COUNT")
                    .arg(1)
                    .clone(),
            )
        })
        .collect();
    redis
        .pipeline(items)
        .await
        .into_iter()
        .map(|r| match r {
            Err(e) if super::reply::is_wrong_type(&e) => Ok(Value::Array(Vec::new())),
            other => other,
        })
        .collect()
}

/// For each `(keys, id)`, whether the product's stream still holds the event `id` (a stream
/// rolled back past it, or lost, does not).
pub async fn exist_many(
    redis: &RedisStore,
    asks: &[(&ProductKeys, EventId)],
) -> Vec<RedisResult<bool>> {
    entries_at(redis, asks)
        .await
        .into_iter()
        .map(|r| r.map(|v| matches!(v, Value::Array(found) if !found.is_empty())))
        .collect()
}

/// For each `(keys, id)`, the kind of the event `id` in the product's stream (None: not there
/// any more, or not readable).
pub async fn kinds_at(
    redis: &RedisStore,
    asks: &[(&ProductKeys, EventId)],
) -> Vec<RedisResult<Option<EventKind>>> {
    entries_at(redis, asks)
        .await
        .into_iter()
        .map(|r| r.map(|v| parse_page(&v, 1).events.first().map(|e| e.kind)))
        .collect()
}

/// For each `(keys, before, cut)`, one page of the product's events at or before `cut` and
/// strictly before `before` (None: from the cut), newest first; pipelined per node.
pub async fn before_many(
    redis: &RedisStore,
    asks: &[(&ProductKeys, Option<EventId>, EventId)],
    count: usize,
) -> Vec<RedisResult<Page>> {
    let items = asks
        .iter()
        .map(|(k, before, cut)| {
            let end = match before {
                Some(b) => b.exclusive(),
                None => cut.to_string(),
            };
            Keyed::new(
                &k.events,
                redis::cmd("XREVRANGE")
                    .arg(&k.events)
                    .arg(end)
                    .arg("-")
                    .arg("COUNT")
                    .arg(count + 1)
                    .clone(),
            )
        })
        .collect();
    paged(redis, items, count + 1)
        .await
        .into_iter()
        .map(|r| r.map(|v| parse_page_peeking(&v, count)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::events::EventKind;

    #[test]
    fn a_pipeline_of_pages_asks_for_a_bounded_number_of_entries() {
        // A cold settle's backward pages (COUNT 201): 99 a pipeline, about 20,000 entries.
        assert_eq!(pages_per_pipeline(PAGE + 1), 99);
        assert!(pages_per_pipeline(PAGE + 1) * (PAGE + 1) <= ENTRIES_PER_PIPELINE);
        assert_eq!(pages_per_pipeline(PAGE), 100);
        // A page bigger than the bound still goes, alone.
        assert_eq!(pages_per_pipeline(ENTRIES_PER_PIPELINE * 2), 1);
        assert_eq!(pages_per_pipeline(0), ENTRIES_PER_PIPELINE);
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn entry(id: &str, k: &str, r: &str, q: &str) -> Value {
        Value::Array(vec![
            bulk(id),
            Value::Array(vec![bulk(k), bulk(&format!("{q}|{r}"))]),
        ])
    }

    #[test]
    fn pages_parse_and_count_what_does_not() {
        let v = Value::Array(vec![
            entry("10-0", "d", "a", "2"),
            entry("11-0", "r", "a", "2"),
            entry("bad", "d", "b", "1"),
            Value::Int(3),
        ]);
        let p = parse_page(&v, 4);
        assert_eq!(p.events.len(), 2);
        assert_eq!(p.events[1].kind, EventKind::Returned);
        assert_eq!((p.bad, p.more), (2, true));
        // The bad entry's id still moves the next page on.
        assert_eq!(p.last, Some(EventId { ms: 11, seq: 0 }));
        assert_eq!(parse_page(&Value::Nil, 4), Page::default());
    }

    #[test]
    fn a_peeking_page_keeps_its_extra_entry_for_the_next_one() {
        let three = Value::Array(vec![
            entry("12-0", "d", "c", "1"),
            entry("11-0", "d", "b", "1"),
            entry("10-0", "d", "a", "1"),
        ]);
        let p = parse_page_peeking(&three, 2);
        assert_eq!((p.events.len(), p.more), (2, true));
        assert_eq!(p.last, Some(EventId { ms: 11, seq: 0 }));
        // A full page with nothing beyond it is the end: no page is asked before the first.
        let p = parse_page_peeking(&three, 3);
        assert_eq!((p.events.len(), p.more), (3, false));
        assert_eq!(parse_page_peeking(&Value::Nil, 2), Page::default());
    }

    #[test]
    fn last_ids() {
        assert_eq!(last_id(&Value::Array(vec![])), Some(EventId::ZERO));
        assert_eq!(
            last_id(&Value::Array(vec![entry("7-3", "d", "a", "1")])),
            Some(EventId { ms: 7, seq: 3 })
        );
        assert_eq!(last_id(&Value::Int(1)), None);
    }
}
