//! Every product's ledger read whole, in HSCAN pages, and the rules held against it alone: a
//! request id on one product, deductions inside the window.

use super::{REQUEST_UNIQUE, Read, SOLD_IN_WINDOW, Tally, shown_ms};
use crate::domain::SaleWindow;
use crate::domain::events::{EventId, EventKind};
use crate::error::Result;
use crate::redis::ledger::scan_page;
use crate::redis::{Keyed, ProductKeys, RedisStore, events};
use futures::StreamExt;
use std::collections::HashMap;

/// Ledgers read at once (each a walk of HSCAN pages).
pub(super) const LEDGERS_IN_FLIGHT: usize = 8;

/// What a product's ledger could say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LedgerState {
    pub(super) exists: bool,
    pub(super) wrong_type: bool,
    pub(super) corrupt: usize,
}

impl LedgerState {
    pub(super) fn whole(&self) -> bool {
        self.exists && !self.wrong_type && self.corrupt == 0
    }

    pub(super) fn why(&self) -> &'static str {
        if !self.exists {
            "is gone (expired after the sale, cleaned up, or lost)"
        } else if self.wrong_type {
            "is not a hash"
        } else {
            "holds entries that are not ledger records (see `status`)"
        }
    }
}

/// Every product's ledger, by request id, and what each ledger could say.
pub(super) struct Ledgers {
    pub(super) by_request: HashMap<String, Vec<Ded>>,
    pub(super) state: Vec<LedgerState>,
}

/// A deduction as its ledger entry records it.
pub(super) struct Ded {
    pub(super) product: u32,
    pub(super) quantity: i64,
    pub(super) at: EventId,
    pub(super) returned: bool,
    pub(super) returned_by: Option<EventId>,
    pub(super) user: Box<[u8]>,
}

/// Every product's ledger, by request id (HSCAN may give an entry twice: kept once), and
/// whether each could be read whole. Each walk is merged as it ends, so at most a few are
/// held twice.
pub(super) async fn read_ledgers(
    redis: &RedisStore,
    pkeys: &[ProductKeys],
    read: &mut Read,
) -> Result<Ledgers> {
    let exists: Vec<Keyed> = pkeys
        .iter()
        .map(|k| Keyed::new(&k.ledger, redis::cmd("EXISTS").arg(&k.ledger).clone()))
        .collect();
    let mut state: Vec<LedgerState> = Vec::with_capacity(pkeys.len());
    for r in redis.pipeline(exists).await {
        state.push(LedgerState {
            exists: matches!(r.map_err(|e| redis.error(&e))?, redis::Value::Int(n) if n > 0),
            ..LedgerState::default()
        });
    }
    let mut walks = futures::stream::iter(pkeys.iter().enumerate().map(|(i, k)| async move {
        let mut out: HashMap<String, Ded> = HashMap::new();
        let mut found = LedgerState::default();
        let mut cursor = 0;
        loop {
            let page = scan_page(redis, k, cursor).await?;
            found.wrong_type |= page.wrong_type;
            found.corrupt += page.corrupt.len();
            for e in page.entries {
                out.insert(
                    e.request_id.clone(),
                    Ded {
                        product: u32::try_from(i).unwrap_or(u32::MAX),
                        quantity: e.quantity,
                        at: e.at,
                        returned: e.returned,
                        returned_by: e.returned_by,
                        user: e.user_raw.into_boxed_slice(),
                    },
                );
            }
            cursor = page.next;
            if cursor == 0 || page.wrong_type {
                return Ok::<_, redis::RedisError>((i, out, found));
            }
        }
    }))
    .buffer_unordered(LEDGERS_IN_FLIGHT);
    let mut by_request: HashMap<String, Vec<Ded>> = HashMap::new();
    while let Some(w) = walks.next().await {
        let (i, entries, found) = w.map_err(|e| redis.error(&e))?;
        if let Some(s) = state.get_mut(i) {
            s.wrong_type = found.wrong_type;
            s.corrupt = found.corrupt;
        }
        for (rid, d) in entries {
            read.ledger_entries += 1;
            by_request.entry(rid).or_default().push(d);
        }
    }
    Ok(Ledgers { by_request, state })
}

pub(super) fn product_of<'a>(ids: &'a [String], d: &Ded) -> &'a str {
    ids.get(d.product as usize).map_or("", String::as_str)
}

pub(super) fn check_unique(ledger: &HashMap<String, Vec<Ded>>, ids: &[String], t: &mut Tally) {
    t.checked(REQUEST_UNIQUE, ledger.len() as u64);
    let mut reused: Vec<(&String, &Vec<Ded>)> =
        ledger.iter().filter(|(_, d)| d.len() > 1).collect();
    reused.sort_by(|a, b| a.0.cmp(b.0));
    for (rid, deds) in reused {
        let products: Vec<&str> = deds.iter().map(|d| product_of(ids, d)).collect();
        t.broken(
            REQUEST_UNIQUE,
            rid,
            products.first().copied().unwrap_or(""),
            format!(
                "deducted on {} products: {}",
                products.len(),
                products.join(", ")
            ),
        );
    }
}

/// Deductions whose ledger time falls outside the window, kept when their event says a buyer
/// was served then (a console's recording after the window, `b`, is no sale).
pub(super) async fn check_deductions_window(
    redis: &RedisStore,
    ledger: &HashMap<String, Vec<Ded>>,
    (ids, pkeys): (&[String], &[ProductKeys]),
    window: SaleWindow,
    t: &mut Tally,
) -> Result<()> {
    let mut outside: Vec<(&String, &Ded)> = Vec::new();
    let mut n = 0u64;
    for (rid, deds) in ledger {
        for d in deds {
            n += 1;
            if window.excludes(d.at.ms) {
                outside.push((rid, d));
            }
        }
    }
    t.checked(SOLD_IN_WINDOW, n);
    outside.sort_by(|a, b| a.0.cmp(b.0));
    for chunk in outside.chunks(500) {
        let asks: Vec<(&ProductKeys, EventId)> = chunk
            .iter()
            .filter_map(|(_, d)| Some((pkeys.get(d.product as usize)?, d.at)))
            .collect();
        let kinds = events::kinds_at(redis, &asks).await;
        for ((rid, d), kind) in chunk.iter().zip(kinds) {
            if kind.map_err(|e| redis.error(&e))? == Some(EventKind::Deducted) {
                t.broken(
                    SOLD_IN_WINDOW,
                    rid,
                    product_of(ids, d),
                    format!(
                        "deducted at {} (Redis time), outside the window {} - {}",
                        shown_ms(d.at.ms),
                        shown_ms(window.opens_ms),
                        shown_ms(window.closes_ms)
                    ),
                );
            }
        }
    }
    Ok(())
}
