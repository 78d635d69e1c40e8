//! The Watchlist among the other readers of its activity ([`crate::redis::peers`]): the safety
//! net's turns by the wall clock, the digests heard and told, and the sweep's share.

use super::{Plan, Watchlist, lane};
use crate::redis::RedisStore;
use crate::redis::cut::ProductCut;
use crate::redis::peers::{self, Bad, Heard, Turns};
use std::time::{Duration, Instant};

/// The instant the safety net's periods of `every` are counted from: a multiple of `every` on
/// the wall clock, so that every reader of an activity has a product fall due at the same
/// time, and one read of it serves them all ([`crate::redis::peers`]).
/// Returns the instant and its time on the wall clock (ms since the epoch).
pub(super) fn aligned_base(every: Duration) -> (Instant, u128) {
    let now = Instant::now();
    let period = every.as_millis().max(1);
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let into = epoch % period;
    match now.checked_sub(Duration::from_millis(u64::try_from(into).unwrap_or(0))) {
        Some(base) => (base, epoch - into),
        None => (now, epoch),
    }
}

/// A digest of what a cut shows (its instant aside, as [`same`]), the same in every reader of
/// one build.
pub(super) fn cut_digest(c: &ProductCut) -> u64 {
    let text = format!("{:?}|{:?}|{:?}|{:?}", c.stock, c.meta, c.position, c.keys);
    peers::digest(text.as_bytes())
}

impl Watchlist {
    /// The second on the wall clock `at` falls in (as every reader counts it): the products
    /// that fall due in one second are one reader's, so that one read and one message serve
    /// them all.
    pub(super) fn second_of(&self, at: Instant) -> u64 {
        let ms = self.base_epoch_ms + at.saturating_duration_since(self.base).as_millis();
        u64::try_from(ms / 1_000).unwrap_or(0)
    }

    /// Takes in what the other readers said since the last read: a digest equal to this
    /// reader's last cut of the product counts as its safety read, now; one that differs (or of
    /// a product it has no cut of) has the product read whole in this refresh, as if Redis had
    /// named it.
    pub(super) fn hear(&mut self, pushed: &mut [bool], now: Instant, publishes: bool) {
        self.round.set_publishes(publishes);
        let Some(feed) = self.feed.as_mut() else {
            return;
        };
        for h in feed.heard() {
            let (from, cuts) = match h {
                Heard::Hello(from) => (from, Vec::new()),
                Heard::Cuts(from, cuts) => (from, cuts),
                Heard::Bad(from, bad) => {
                    if from != self.round.me() && self.told_bad.len() < 1_000 {
                        self.told_bad.push(bad);
                    }
                    (from, Vec::new())
                }
            };
            self.round.heard_from(from, now);
            if from == self.round.me() {
                continue;
            }
            for (id, d) in cuts {
                let Some(&i) = self.known.index.get(id.as_str()) else {
                    continue;
                };
                let stands = self.known.cut(i).is_some_and(|c| cut_digest(c) == d);
                match self.known.brief(i).copied() {
                    Some(mut b) if stands => {
                        b.whole_at = now;
                        b.due = (
                            self.due_after(now, b.lane, self.opts.full_every_tracked),
                            self.due_after(now, b.lane, self.opts.full_every),
                        );
                        if let Some(slot) = self.known.brief.get_mut(i) {
                            *slot = Some(b);
                        }
                        self.cost.shared += 1;
                    }
                    _ => {
                        if let Some(p) = pushed.get_mut(i) {
                            *p = true;
                        }
                    }
                }
            }
        }
        self.cost.peers = self.round.peers() as u64;
    }

    /// Publishes the digests of the products this refresh read for the safety net alone, and
    /// says it is there every few seconds (a reader that may write; see [`crate::redis::peers`]).
    pub(super) async fn tell(
        &mut self,
        redis: &RedisStore,
        ids: &[&str],
        whole: &[usize],
        plans: &[Plan],
        now: Instant,
    ) {
        if redis.read_only() {
            return;
        }
        let Some(feed) = self.feed.as_mut().filter(|f| f.listening()) else {
            return;
        };
        let me = self.round.me();
        let cuts: Vec<(&str, u64)> = whole
            .iter()
            .filter(|&&i| plans[i] == Plan::Net)
            .filter_map(|&i| Some((ids[i], cut_digest(self.known.cut(i)?))))
            .collect();
        let mut messages = peers::cuts_messages(me, &cuts);
        if messages.is_empty() && self.round.hello_due(now) {
            messages.push(peers::hello_message(me));
        }
        if !messages.is_empty() {
            self.round.said(now);
            feed.say(redis, &messages).await;
        }
    }

    /// Whether this reader sweeps product `id`'s entries itself ([`crate::ops::integrity`]):
    /// its turn among the readers that publish, as for the safety net; the others are told
    /// what it finds ([`Watchlist::tell_bad`]).
    pub fn sweeps(&self, id: &str) -> bool {
        self.turns.as_ref().is_none_or(|t| t.mine(lane(id)))
    }

    /// How many readers that publish share the sweep and the safety net, this one among them
    /// (1: it does them alone).
    pub fn sharing(&self) -> usize {
        self.turns.as_ref().map_or(1, Turns::sharing)
    }

    /// The unreadable entries the other readers' sweeps found since the last call.
    pub fn told_bad(&mut self) -> Vec<Bad> {
        std::mem::take(&mut self.told_bad)
    }

    /// Tells the other readers the unreadable entries this reader's sweep found (not in
    /// read-only mode; best effort).
    pub async fn tell_bad(&mut self, redis: &RedisStore, bad: &[Bad]) {
        if bad.is_empty() || redis.read_only() {
            return;
        }
        let me = self.round.me();
        let messages: Vec<String> = bad.iter().map(|b| peers::bad_message(me, b)).collect();
        if let Some(feed) = self.feed.as_mut().filter(|f| f.listening()) {
            feed.say(redis, &messages).await;
        }
    }
}
