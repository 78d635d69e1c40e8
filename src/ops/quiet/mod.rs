//! Which products a live refresh reads whole, and which it only asks "did you move?".
//!
//! First of all, Redis is asked to say which keys of the activity were written
//! ([`crate::redis::changes`]): with its pushes a refresh reads whole only the products named
//! (and each product once every `full_every_tracked`, in turns), and a quiet product costs no
//! command. What follows is how the live view reads where the server refuses them.
//!
//! A cut of a product ([`crate::redis::cut`]) sends five commands, and a share of two batched
//! ones; when it sent seven, on 10,000 quiet products every refresh, that was 84,000 commands
//! and 181 ms of Redis a second, to learn that nothing happened. Every
//! write of the scripts appends an event to the product's stream (a pause too), so one XREAD of
//! the streams after the positions of the last cut tells which products a script wrote: a
//! hundred streams in one command on a single server (about 0.6 us of Redis a stream), one
//! each in a cluster, where each stream sits in a slot of its own. A product that did not move
//! keeps its last cut, at the new instant; one that moved is read whole in the same refresh.
//!
//! What the stream cannot show is a write outside the scripts: a key evicted, deleted or set
//! by hand, a node restored from an older snapshot. Each product is therefore still read whole
//! at least every `full_every` (in turns, so the refreshes share the work), every product is
//! read whole after the node set changes, a connection is opened again (a restart, perhaps from
//! an older snapshot) or a node evicts keys ([`Watchlist::recut`], from the status poll's INFO),
//! and a product whose last cut showed anything wrong (a lost piece,
//! an unreadable value) is read whole on every refresh until it is right again.
//!
//! A product with no key at all (an activity before its preheat, one whose keys expired, a
//! product whose keys all went) is quiet the same way: nothing is there to be wrong, and a
//! read of its five absent keys told nothing new each refresh (0.7 s of Redis a refresh for
//! 100,000 products). It is asked whether its stock or its stream exists now
//! ([`cut::appeared`]): whatever a script writes creates the stream, so a preheat or a fix shows
//! as a sale does.
//!
//! Products that moved recently are read whole on every refresh (they are selling: a probe
//! would only add a command). Products quiet for a while are asked every fifth refresh, a
//! fifth of them each time: such a product's first sale shows up to four refreshes later,
//! and until then the product shows its last cut at that cut's own instant (its books stand
//! there), not a figure of one instant with the stock of another.

use super::progress::SettleGauge;
use crate::domain::events::EventId;
use crate::domain::rid_hash::RidMap;
use crate::domain::stock::StockValue;
use crate::redis::changes::{ChangeFeed, Changes, Mode};
use crate::redis::cut::{self, Clocks, KeysPresent, ProductCut};
use crate::redis::peers::{self, Bad, Round, Turns};
use known::{Brief, Known};
use round::aligned_base;

mod known;
mod round;
use crate::redis::{ProductKeys, RedisStore};
use redis::RedisResult;
use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::time::{Duration, Instant};

/// How the live view spreads its reads over quiet products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuietOptions {
    /// Refreshes after a product last moved during which it is read whole every refresh.
    pub hot: u64,
    /// Refreshes a product stays quiet before it is asked only every `slow_every` refreshes.
    pub slow_after: u64,
    /// How often a product quiet for longer than `slow_after` is asked (in turns: a share of
    /// them each refresh).
    pub slow_every: u64,
    /// Every product is read whole at least this often (what the streams cannot show).
    pub full_every: Duration,
    /// Ask Redis to push which products changed ([`ChangeFeed`]) and read only those; the
    /// streams are asked instead where the server refuses.
    pub track: bool,
    /// With the pushes, every product is still read whole at least this often: a safety net
    /// for what nobody expects to be missed, spread in turns (at 1 Hz, 100,000 products read
    /// 167 a refresh).
    pub full_every_tracked: Duration,
    /// A refresh that reads more than a page of products whole (a console's first, or every
    /// product after a failover) reads them a page at a time and rests between pages so that
    /// its reads take at most this share of Redis's time, in percent (the sale needs the
    /// rest; the view says "settling, N%" meanwhile).
    pub share_pct: u8,
    /// The pushes are asked for by key (one push per moved product per refresh, rather than
    /// one per sale) while the activity has at most this many keys (five a product) and sits
    /// on one primary: Redis remembers each for the reader, about 130 bytes a key. Beyond, by
    /// the activity's prefix (see [`crate::redis::changes`]). 0: always by prefix.
    pub track_keys_max: usize,
}

/// The keys of a product the pushes watch (the scripts' five).
const KEYS_A_PRODUCT: usize = 5;

/// Products read whole in one go before a refresh rests ([`QuietOptions::share_pct`]).
pub const PAGE: usize = 2_000;

/// Rests after a page of reads that took `took` (wall time: Redis's share of it is less, so
/// the share kept is at most `share_pct`).
pub async fn rest_after(took: Duration, share_pct: u8) {
    let share = u32::from(share_pct.clamp(1, 100));
    if share < 100 {
        tokio::time::sleep(took * (100 - share) / share).await;
    }
}

impl Default for QuietOptions {
    fn default() -> Self {
        QuietOptions {
            hot: 10,
            slow_after: 30,
            // Asking a stream costs Redis 0.6 us warm but 2.1 us on this machine's cold memory
            // (TUI benchmark, 2026-12-03: 10,000 products asked every other refresh took 10.7
            // ms a refresh of XREAD alone; every fourth refresh, 4.3 ms of a 10.3 ms refresh).
            // Every fifth keeps the live view of 10,000 quiet products under 10 ms of Redis a
            // refresh, and a quiet product's first sale still shows within five seconds at 1 Hz.
            slow_every: 5,
            full_every: Duration::from_secs(60),
            track: true,
            full_every_tracked: Duration::from_secs(600),
            // A fresh reader at 100,000 products took 1.05 of a `status` of Redis's time in its
            // first 10 s at 20% (live benchmark, 2026-12-07): the line is one.
            share_pct: 15,
            // 20,000 products: about 13 MB of Redis's memory for the tracking table.
            track_keys_max: 100_000,
        }
    }
}

/// What the last refresh did, per kind of read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuietCost {
    /// Products read whole.
    pub whole: u64,
    /// Products asked whether their stream moved (and found it had not).
    pub asked: u64,
    /// Products neither read nor asked: shown at their last cut.
    pub resting: u64,
    /// True when Redis's pushes said which products moved (no product was asked).
    pub tracked: bool,
    /// Products whose safety read another reader made and published, found as this reader
    /// last read them ([`crate::redis::peers`]): not read again.
    pub shared: u64,
    /// Other readers of the activity heard lately.
    pub peers: u64,
}

/// What one refresh does with a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Whole,
    /// Read whole for the safety net alone (its turn came, nothing named it): its digest is
    /// published for the other readers.
    Net,
    Ask,
    Rest,
}

/// The live view's memory of every product's last cut.
#[derive(Debug)]
pub struct Watchlist {
    opts: QuietOptions,
    known: Known,
    refresh: u64,
    /// The primaries at the end of the last read and how many connections each had opened:
    /// another set (a failover, a reshard) or a connection opened again (a restart, perhaps
    /// from an older snapshot) reads every product whole. See [`reopened`].
    primaries: Vec<(String, u64)>,
    recut: bool,
    /// Where the periods of whole reads are counted from ([`aligned_base`]), and its time on
    /// the wall clock (ms).
    base: Instant,
    base_epoch_ms: u128,
    /// Products whose cut differs from the one before (first reads not counted), this refresh.
    moved: Vec<String>,
    /// This refresh read every product without a cut to compare with (the cuts were forgotten
    /// after a reconnect, a failover or a failed refresh): any of them may have moved.
    anew: bool,
    pub cost: QuietCost,
    /// Redis's pushes of what changed, once the first read asked for them.
    feed: Option<ChangeFeed>,
    /// When the last read knew from the pushes that every product not read whole stood still.
    tracked_at: Option<Instant>,
    /// Where a read of many products says how far it is.
    gauge: SettleGauge,
    /// Each node's clock at the last read, for the products it did not read whole (None:
    /// it read every product whole).
    clocks: Option<Clocks>,
    /// The other readers of the activity, who share the safety net's reads.
    round: Round,
    /// Whose turn each product was at the last read, when the pushes were alive (None: this
    /// reader reads everything itself).
    turns: Option<Turns>,
    /// Unreadable entries the other readers' sweeps found since the last call.
    told_bad: Vec<Bad>,
}

/// A product's lane: its turn among the refreshes and among the readers, from its id alone
/// (the same in every reader of one build).
fn lane(id: &str) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(id)
}

/// Each primary and how many connections it has opened so far.
fn connections(redis: &RedisStore) -> Vec<(String, u64)> {
    redis
        .primaries()
        .iter()
        .map(|n| (n.addr.clone(), n.generation()))
        .collect()
}

/// True when what was read from the primaries `before` may not be what they hold `after`:
/// another set of primaries, or a node whose connection was opened again (it was lost: the
/// server may have restarted from an older snapshot). A node's first connection is not one:
/// connections open lazily, so a console opened on a running cluster meets most nodes first
/// during its first read, and nothing was read from a node before it had a connection.
fn reopened(before: &[(String, u64)], after: &[(String, u64)]) -> bool {
    before.len() != after.len()
        || before
            .iter()
            .zip(after)
            .any(|((a, was), (b, is))| a != b || (is != was && !(*was == 0 && *is == 1)))
}

/// True when the cut shows nothing wrong: a stock that is a number, a readable meta hash with
/// its limit and counters, every key there, a stream position, and no top-up or rebuild between
/// its two writes. The marker of one is cleared by a meta write that appends no event when the
/// stock stays (a fix finishing a top-up its console left): asked only whether its stream
/// moved, the live view kept showing the top-up held after the fix (chaos test, invariant 7).
fn sound(c: &ProductCut) -> bool {
    matches!(c.stock, StockValue::Value(_))
        && c.meta.topup.is_none()
        && c.meta.frozen.is_none()
        && c.meta.corrupt.is_none()
        && c.keys.foreign.is_none()
        && c.position.is_some()
        && c.active().is_some()
        && c.lost().is_empty()
}

/// True when the cut found none of the product's keys: nothing to read until one appears.
fn absent(c: &ProductCut) -> bool {
    c.stock == StockValue::Missing
        && !c.meta.present
        && c.meta.corrupt.is_none()
        && c.keys == KeysPresent::default()
        && c.position == Some(EventId::ZERO)
}

/// True when a refresh may only ask the product whether it moved: its cut is sound, or it has
/// no key at all.
fn settled(c: &ProductCut) -> bool {
    sound(c) || absent(c)
}

/// True when a product read whole went from `before` to `now` by a write no script made: it
/// was sound and now is not (a key gone or unreadable), or its stock changed, while its stream
/// did not move on (every script that writes the stock appends an event; a few meta writes on
/// a product never sold do not, so the meta hash is no such evidence).
fn outside_the_scripts(before: &ProductCut, now: &ProductCut) -> bool {
    // A stream that moved on explains a change (a rebuild's hold takes the stock key away
    // with an event); one that stood still or went back (a restart from an older snapshot, a
    // FLUSHALL) does not.
    let stood = now.position <= before.position;
    sound(before) && stood && (!sound(now) || now.stock != before.stock)
}

/// The same cut, the read's instant aside.
pub(crate) fn same(a: &ProductCut, b: &ProductCut) -> bool {
    a.stock == b.stock && a.meta == b.meta && a.position == b.position && a.keys == b.keys
}

impl Watchlist {
    pub fn new(opts: QuietOptions) -> Self {
        let (base, base_epoch_ms) = aligned_base(opts.full_every_tracked);
        Watchlist {
            opts,
            known: Default::default(),
            refresh: 0,
            primaries: Vec::new(),
            recut: false,
            base,
            base_epoch_ms,
            moved: Vec::new(),
            anew: false,
            cost: QuietCost::default(),
            feed: None,
            tracked_at: None,
            gauge: SettleGauge::default(),
            clocks: None,
            round: Round::new(true),
            turns: None,
            told_bad: Vec::new(),
        }
    }

    /// Says how far a read of many products is on `gauge`.
    pub fn set_gauge(&mut self, gauge: SettleGauge) {
        self.gauge = gauge;
    }

    /// The products Redis named since this refresh's read began (a barrier: every write before
    /// this call is in it); None when the read did not learn from the pushes or they are not
    /// known now. A product not named has not moved since its cut.
    pub async fn pushed_since_read(&mut self, redis: &RedisStore) -> Option<HashSet<String>> {
        self.tracked_at?;
        self.feed.as_mut()?.peek(redis).await
    }

    /// Reads every product whole on the next refresh (keys may have gone without a script:
    /// eviction, a restart, a failover), unless Redis's pushes, alive since the last read, say
    /// what moved: they name every key evicted or written by hand, and a restart or a failover
    /// loses them. (Read whole at each growth of `evicted_keys`, a console would re-read 100,000
    /// products at every poll of an eviction storm, on the Redis that is short of memory.)
    pub fn recut(&mut self) {
        self.recut = true;
    }

    /// Forgets every cut (the books they stood for were dropped).
    pub fn forget(&mut self) {
        self.known.clear();
    }

    /// The products whose cut changed at the last refresh (a product read for the first
    /// time is not among them).
    pub fn moved(&self) -> &[String] {
        &self.moved
    }

    /// True when the last refresh had no earlier cut of any product (after the first): which
    /// of them moved cannot be told, so whatever a reader keeps beside the cuts (the product
    /// rows) is read again. A reconnect made it count none as moved, and a resume and a top-up
    /// made across it were shown against rows up to 30 s old.
    pub fn anew(&self) -> bool {
        self.anew
    }

    /// How long ago the product read whole least recently was: what the streams cannot show
    /// (a key set, deleted or evicted outside the scripts) may be this old on screen.
    pub fn keys_age(&self) -> Option<Duration> {
        let now = Instant::now();
        if let Some(at) = self.tracked_at {
            return (!self.known.is_empty()).then(|| now.saturating_duration_since(at));
        }
        self.known
            .brief
            .iter()
            .flatten()
            .map(|k| now.saturating_duration_since(k.whole_at))
            .max()
    }

    /// Which period of whole reads `at` falls in, for a product of `lane`: each product's
    /// periods are offset by its lane, so their whole reads fall due in turns rather than all
    /// in one refresh (the reads of a product's first ten refreshes would otherwise set every
    /// product's clock alike). A product is read whole once its last whole read lies in an
    /// earlier period.
    fn turn(&self, at: Instant, lane: u64, every: Duration) -> u128 {
        let period = every.as_millis().max(1);
        let since = at.saturating_duration_since(self.base).as_millis();
        (since + u128::from(lane) % period) / period
    }

    /// When a product of `lane` read whole at `at` falls due again: the start of its next
    /// period ([`Watchlist::turn`] of that instant is one more than `at`'s).
    fn due_after(&self, at: Instant, lane: u64, every: Duration) -> Instant {
        let period = every.as_millis().max(1);
        let next = (self.turn(at, lane, every) + 1) * period - u128::from(lane) % period;
        let next = Duration::from_millis(u64::try_from(next).unwrap_or(u64::MAX));
        // Far beyond any refresh where the sum does not fit an instant.
        self.base
            .checked_add(next)
            .unwrap_or_else(|| at + Duration::from_secs(365 * 86_400))
    }

    /// What this refresh does with a product; `pushed`: the products Redis said moved, when
    /// it said so.
    fn plan(
        &self,
        i: usize,
        carried: bool,
        now: Instant,
        (pushed, turns): (Option<&[bool]>, &Turns),
    ) -> Plan {
        if !carried {
            return Plan::Whole;
        }
        let Some(k) = self.known.brief(i) else {
            return Plan::Whole;
        };
        if let Some(moved) = pushed {
            // Redis names every key written, deleted, expired or evicted: one it did not name
            // stands as last read, whatever its cut showed. Its safety read is this reader's
            // when its turn is, or when no other reader's digest came within the grace.
            return if moved.get(i).copied().unwrap_or(true) {
                Plan::Whole
            } else if now >= k.due.0
                && (turns.mine(self.second_of(k.due.0)) || now >= k.due.0 + peers::GRACE)
            {
                Plan::Net
            } else {
                Plan::Rest
            };
        }
        let quiet_for = self.refresh.saturating_sub(k.moved_at);
        let due = now >= k.due.1;
        if quiet_for <= self.opts.hot || due || !k.settled {
            Plan::Whole
        } else if quiet_for <= self.opts.slow_after
            || self
                .refresh
                .wrapping_add(k.lane)
                .is_multiple_of(self.opts.slow_every.max(1))
        {
            Plan::Ask
        } else {
            Plan::Rest
        }
    }

    /// What Redis pushed since the last read, the watch opened first if need be (None: the
    /// pushes are off, refused or lost). By key up to the budget on one primary, else by the
    /// activity's prefix ([`QuietOptions::track_keys_max`]).
    async fn sync(
        &mut self,
        redis: &RedisStore,
        products: usize,
        (key_prefix, activity): (&str, &str),
    ) -> Option<Changes> {
        if !self.opts.track {
            return None;
        }
        let mode = if !redis.is_cluster()
            && products.saturating_mul(KEYS_A_PRODUCT) <= self.opts.track_keys_max
        {
            Mode::Keys
        } else {
            Mode::Prefix
        };
        // An activity grown past the budget (or back under it) watches anew: everything is
        // read once, and registered again by key.
        if self.feed.as_ref().is_some_and(|f| f.mode() != mode) {
            self.feed = None;
        }
        self.feed
            .get_or_insert_with(|| ChangeFeed::new(key_prefix, activity, mode))
            .sync(redis)
            .await
    }

    /// The cuts of `wanted`, a page at a time with a rest after each when there are more than
    /// a page ([`QuietOptions::share_pct`]). Pushes asked for by key are registered for each
    /// page just before it is read, except for the products `registered` says still are (read
    /// for the safety net alone: nothing written since their last registration, which Redis
    /// keeps until it pushes; registering them again was 40% of a settled reader's Redis time
    /// at 10,000 products).
    async fn read_paced(
        &self,
        redis: &RedisStore,
        (wanted, registered): (&[ProductKeys], &[bool]),
        mut feed: Option<&mut ChangeFeed>,
    ) -> RedisResult<Vec<ProductCut>> {
        let unregistered = |from: usize, page: &[ProductKeys]| -> Vec<ProductKeys> {
            page.iter()
                .enumerate()
                .filter(|(j, _)| !registered.get(from + j).copied().unwrap_or(false))
                .map(|(_, k)| k.clone())
                .collect()
        };
        if wanted.len() <= PAGE {
            if let Some(f) = feed {
                f.register(&unregistered(0, wanted)).await;
            }
            return cut::read(redis, wanted).await;
        }
        let pages = wanted.len().div_ceil(PAGE);
        self.gauge.start(wanted.len() as u64);
        let mut out = Vec::with_capacity(wanted.len());
        for (n, page) in wanted.chunks(PAGE).enumerate() {
            let began = Instant::now();
            if let Some(f) = feed.as_deref_mut() {
                f.register(&unregistered(n * PAGE, page)).await;
            }
            let cuts = cut::read(redis, page).await;
            let cuts = match cuts {
                Ok(c) => c,
                Err(e) => {
                    self.gauge.finish();
                    return Err(e);
                }
            };
            out.extend(cuts);
            self.gauge.read(out.len() as u64);
            if n + 1 < pages {
                rest_after(began.elapsed(), self.opts.share_pct).await;
            }
        }
        self.gauge.finish();
        Ok(out)
    }

    /// The last cut of product `ids[i]` of the last read, as it was read (at that read's
    /// instant).
    pub fn last_cut(&self, i: usize) -> Option<&ProductCut> {
        self.known.cut(i)
    }

    /// Redis's clock at the last read (the latest node's; the local clock where TIME is
    /// refused), when it read some products not whole.
    pub fn clock_ms(&self) -> Option<i64> {
        self.clocks.as_ref().map(Clocks::latest)
    }

    /// The last cut of product `ids[i]` of the last read (of `keys`) at this refresh's
    /// instant: a product the last read did not read whole stands as it was then, now. None:
    /// never read.
    pub fn cut_now(&self, redis: &RedisStore, i: usize, keys: &ProductKeys) -> Option<ProductCut> {
        let mut c = self.known.cut(i)?.clone();
        if let Some(clocks) = &self.clocks {
            // Shown as last read, but judged now: a deduction in flight at that read is
            // orphaned once the grace window has passed on Redis's clock, whether or not this
            // refresh asked the stream (judged at the read's instant, a resting product's
            // orphans read 0 four refreshes in five).
            c.now_ms = clocks.of(redis, keys).max(c.now_ms);
        }
        Some(c)
    }

    /// Reads the products that moved or fall due whole, and returns their indices in `ids`,
    /// in order: their cuts are [`Watchlist::last_cut`] now; every other product stands as its
    /// last cut ([`Watchlist::cut_now`]; asked or resting, nothing moved it).
    /// `carried(i)` says whether the caller holds books standing at product `ids[i]`'s last cut
    /// (without them a product is read whole). Nothing is copied: a copy of every product's
    /// cut each refresh was 40 MB at 100,000 products.
    pub async fn read(
        &mut self,
        redis: &RedisStore,
        (ids, keys, generation): (&[&str], &[ProductKeys], u64),
        (key_prefix, activity): (&str, &str),
        carried: impl Fn(usize) -> bool,
    ) -> RedisResult<Vec<usize>> {
        // Products taken out of the activity are forgotten (only when the list changed).
        self.known.align(ids, generation);
        self.refresh += 1;
        self.clocks = None;
        self.cost = QuietCost::default();
        self.moved.clear();
        self.tracked_at = None;
        // The pushes are asked for before anything is read: a write after this is named by
        // a later sync, whatever this read finds.
        let pushed = self.sync(redis, ids.len(), (key_prefix, activity)).await;
        let synced = Instant::now();
        let start = connections(redis);
        let everything = matches!(pushed, Some(Changes::Everything));
        // With the pushes alive since the last read, what a recut stands for (a write outside
        // the scripts, an eviction, a connection opened again after a timeout) is named by them.
        let told = matches!(pushed, Some(Changes::Moved(_)));
        let recut = std::mem::take(&mut self.recut) || reopened(&self.primaries, &start);
        if (recut && !told) || everything {
            self.known.clear();
        }
        // What Redis named, by the products' place in the list.
        let pushed: Option<Vec<bool>> = match pushed {
            Some(Changes::Moved(m)) => {
                let mut at = vec![false; ids.len()];
                for id in &m {
                    if let Some(&i) = self.known.index.get(id.as_str()) {
                        at[i] = true;
                    }
                }
                Some(at)
            }
            Some(Changes::Everything) => Some(vec![false; ids.len()]),
            None => None,
        };
        self.anew = self.refresh > 1 && self.known.is_empty();
        let now = Instant::now();
        let mut pushed = pushed;
        if let Some(at) = pushed.as_mut() {
            self.hear(at, now, !redis.read_only());
        }
        let turns = self.round.turns(now);
        let mut plans: Vec<Plan> = (0..ids.len())
            .map(|i| self.plan(i, carried(i), now, (pushed.as_deref(), &turns)))
            .collect();
        self.turns = pushed.is_some().then_some(turns);

        // Asked products are settled: a sound one's stream is asked for an event after its
        // last cut's position, one without keys whether any appeared.
        let (bare, streamed): (Vec<usize>, Vec<usize>) = (0..ids.len())
            .filter(|&i| plans[i] == Plan::Ask)
            .partition(|&i| self.known.brief(i).is_some_and(|k| k.absent));
        if !streamed.is_empty() {
            let asks: Vec<(&ProductKeys, EventId)> = streamed
                .iter()
                .map(|&i| {
                    let at = self.known.cut(i).and_then(|c| c.position);
                    (&keys[i], at.unwrap_or(EventId::ZERO))
                })
                .collect();
            let moved = cut::moved_after(redis, &asks).await?;
            for (&i, moved) in streamed.iter().zip(moved) {
                if moved {
                    plans[i] = Plan::Whole;
                }
            }
        }
        if !bare.is_empty() {
            let asks: Vec<&ProductKeys> = bare.iter().map(|&i| &keys[i]).collect();
            let appeared = cut::appeared(redis, &asks).await?;
            for (&i, appeared) in bare.iter().zip(appeared) {
                if appeared {
                    plans[i] = Plan::Whole;
                }
            }
        }

        let whole: Vec<usize> = (0..ids.len())
            .filter(|&i| matches!(plans[i], Plan::Whole | Plan::Net))
            .collect();
        let wanted: Vec<ProductKeys> = whole.iter().map(|&i| keys[i].clone()).collect();
        let registered: Vec<bool> = whole.iter().map(|&i| plans[i] == Plan::Net).collect();
        // Registered by key only while the pushes are alive (else the next sync that has them
        // reads everything anyway).
        let mut feed = self.feed.take();
        let registering = feed.as_mut().filter(|_| pushed.is_some());
        let fresh = self
            .read_paced(redis, (&wanted, &registered), registering)
            .await;
        self.feed = feed;
        let fresh = fresh?;
        self.clocks = if whole.len() < ids.len() {
            Some(Clocks::read(redis).await)
        } else {
            None
        };

        // A connection lost and opened again during this read: what was read before it may
        // be older than what the node holds now, so the next refresh reads whole.
        let end = connections(redis);
        if reopened(&start, &end) {
            self.recut = true;
        } else if pushed.is_some() {
            self.cost.tracked = true;
            self.tracked_at = Some(synced);
        }
        self.primaries = end;

        for (&i, c) in whole.iter().zip(fresh) {
            let lane = lane(ids[i]);
            let before = self.known.cut(i);
            let moved = before.is_none_or(|k| !same(k, &c));
            if moved && before.is_some() {
                self.moved.push(ids[i].to_string());
            }
            if before.is_some_and(|k| outside_the_scripts(k, &c)) {
                // Something wrote outside the scripts (a FLUSHALL, a DEL, an eviction, a
                // restart from an older snapshot): the products not read whole this refresh
                // may have met it too, so the next refresh reads every one (after a FLUSHALL
                // the view needed a minute to count 2,000 products gone). Redis's pushes name
                // such writes themselves.
                if pushed.is_none() {
                    self.recut = true;
                }
            }
            let moved_at = match self.known.brief(i) {
                Some(k) if !moved && settled(&c) => k.moved_at,
                _ => self.refresh,
            };
            let whole_at = now;
            let due = (
                self.due_after(whole_at, lane, self.opts.full_every_tracked),
                self.due_after(whole_at, lane, self.opts.full_every),
            );
            let brief = Brief {
                moved_at,
                whole_at,
                lane,
                due,
                settled: settled(&c),
                absent: absent(&c),
            };
            self.known.insert(i, brief, c);
        }
        if pushed.is_some() {
            self.tell(redis, ids, &whole, &plans, now).await;
        }
        self.cost.whole = whole.len() as u64;
        for plan in &plans {
            match plan {
                Plan::Whole | Plan::Net => {}
                Plan::Ask => self.cost.asked += 1,
                Plan::Rest => self.cost.resting += 1,
            }
        }
        Ok(whole)
    }
}

#[cfg(test)]
mod tests {
    use super::reopened;

    fn nodes(gens: &[(&str, u64)]) -> Vec<(String, u64)> {
        gens.iter().map(|(a, g)| (a.to_string(), *g)).collect()
    }

    #[test]
    fn a_first_connection_is_not_a_restart_and_a_second_one_is() {
        let before = nodes(&[("a:1", 1), ("b:1", 0)]);
        assert!(!reopened(&before, &nodes(&[("a:1", 1), ("b:1", 1)])));
        assert!(!reopened(&before, &before));
        // Opened again: lost since the last read.
        assert!(reopened(&before, &nodes(&[("a:1", 2), ("b:1", 0)])));
        // Opened, lost and opened again.
        assert!(reopened(&before, &nodes(&[("a:1", 1), ("b:1", 2)])));
    }

    #[test]
    fn another_set_of_primaries_is_a_change() {
        let before = nodes(&[("a:1", 1), ("b:1", 1)]);
        assert!(reopened(&before, &nodes(&[("a:1", 1), ("c:1", 1)])));
        assert!(reopened(&before, &nodes(&[("a:1", 1)])));
        // The first read: nothing was known.
        assert!(reopened(&[], &before));
    }
}
