//! Stock truth per product, its state and its drift: the rules the README gives under "Truth,
//! drift and state", with no I/O.

use super::events::EventId;
use super::faults::Faults;
pub use super::meta::{META_FIELDS, Meta, Piece};
use serde::Serialize;

/// Most digits an integer may have: every integer of 15 digits is exact in a Lua number (a
/// double); 16 digits are not all.
pub const MAX_DIGITS: usize = 15;

/// Redis's own integer rule, which the Lua scripts apply too: `0`, or an optional `-`, a digit
/// 1-9, then digits, at most [`MAX_DIGITS`] of them. `01`, `-0`, `+5`, ` 5` and 16 digits are
/// not integers: INCRBY and HINCRBY refuse them, so the scripts must never start on them.
pub fn parse_int(raw: &[u8]) -> Option<i64> {
    if raw == b"0" {
        return Some(0);
    }
    let digits = raw.strip_prefix(b"-").unwrap_or(raw);
    let ok = matches!(digits.first(), Some(b'1'..=b'9'))
        && digits.len() <= MAX_DIGITS
        && digits.iter().all(u8::is_ascii_digit);
    if !ok {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// What a stock key holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StockValue {
    Missing,
    /// A string that is not an integer: the raw bytes.
    Corrupt(Vec<u8>),
    /// A key of another type (`list`, `hash`, ...).
    WrongType(String),
    Value(i64),
}

impl StockValue {
    /// Reads the reply of GET: None is missing.
    pub fn from_raw(raw: Option<&[u8]>) -> Self {
        match raw {
            None => StockValue::Missing,
            Some(b) => match parse_int(b) {
                Some(v) => StockValue::Value(v),
                None => StockValue::Corrupt(b.to_vec()),
            },
        }
    }

    pub fn value(&self) -> Option<i64> {
        match self {
            StockValue::Value(v) => Some(*v),
            _ => None,
        }
    }

    /// How the value is shown to an operator; None when missing.
    pub fn shown(&self) -> Option<String> {
        match self {
            StockValue::Missing => None,
            StockValue::Corrupt(raw) => Some(shown(raw)),
            StockValue::WrongType(t) => Some(format!("<{t}>")),
            StockValue::Value(v) => Some(v.to_string()),
        }
    }

    /// The compare-and-set guard of `set_stock.lua` that matches exactly this value.
    pub fn guard(&self) -> Vec<u8> {
        match self {
            StockValue::Missing => b"!".to_vec(),
            StockValue::Corrupt(raw) => [b"=".as_slice(), raw].concat(),
            StockValue::WrongType(t) => format!("@{t}").into_bytes(),
            StockValue::Value(v) => format!("={v}").into_bytes(),
        }
    }
}

/// Text from outside (a request id, an order id, another product's id) as it may reach a
/// terminal: control characters and bidi overrides escaped (`\u{1b}`), everything else as
/// written (a Chinese id stays readable).
pub fn printable(s: &str) -> String {
    let risky =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !s.chars().any(risky) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if risky(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// A value as it may be printed: at most 64 characters, control characters escaped.
pub fn shown(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out: String = text
        .chars()
        .take(64)
        .flat_map(char::escape_default)
        .collect();
    if text.chars().count() > 64 {
        out.push_str("...");
    }
    out
}

/// One deduction record of the ledger: `<state>|<qty>|<at>|<result>|<user>`, where the state
/// is `d` (deducted) or `r@<id>` (returned by the event `<id>`; a bare `r` from before returns
/// carried their event) and `<at>` is the deduction's event id (a bare time from before).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerEntry {
    pub request_id: String,
    pub returned: bool,
    /// The event that returned it; None when not returned, or returned before the stream
    /// existed (then it counts as returned before any cut).
    pub returned_by: Option<EventId>,
    pub quantity: i64,
    /// The deduction's event (Redis time and place in the product's history).
    pub at: EventId,
    /// The stock the deduction left (what a retry gets back).
    pub result: i64,
    /// The user, as shown (lossy when not UTF-8).
    pub user: String,
    /// The user exactly as the ledger holds it.
    pub user_raw: Vec<u8>,
}

impl LedgerEntry {
    /// Parses one record; None for anything else. The user is the record's last field and may
    /// hold any bytes (the scripts never read it): shown lossily, kept exactly in [`Self::user_raw`].
    pub fn parse(request_id: &str, raw: &[u8]) -> Option<Self> {
        let mut parts = raw.splitn(5, |b| *b == b'|');
        let text = |p: &[u8]| std::str::from_utf8(p).ok().map(str::to_string);
        let state = text(parts.next()?)?;
        // Redis's integer rule, as the scripts read these fields.
        let quantity = parse_int(parts.next()?)?;
        let at = EventId::parse(&text(parts.next()?)?)?;
        let result = parse_int(parts.next()?)?;
        let user_raw = parts.next()?.to_vec();
        let (returned, returned_by) = match state.as_str() {
            "d" => (false, None),
            "r" => (true, None),
            _ => (true, Some(EventId::parse(state.strip_prefix("r@")?)?)),
        };
        if quantity < 1 {
            return None;
        }
        Some(LedgerEntry {
            request_id: request_id.to_string(),
            returned,
            returned_by,
            quantity,
            at,
            result,
            user: String::from_utf8_lossy(&user_raw).into_owned(),
            user_raw,
        })
    }

    /// Redis time of the deduction, ms since the epoch.
    pub fn at_ms(&self) -> i64 {
        self.at.ms
    }

    /// Like [`LedgerEntry::active_at`], for a cut whose counters were read after Redis's
    /// clock said `cut_ms`: a deduction (or return) of an earlier millisecond came before the
    /// cut even when its event is no longer in the stream (deleted, so the cut's position,
    /// the newest event left, may be older than it).
    pub fn active_at_cut(&self, cut: EventId, cut_ms: i64) -> bool {
        let before = |id: EventId| id <= cut || id.ms < cut_ms;
        before(self.at)
            && match (self.returned, self.returned_by) {
                (false, _) => true,
                (true, Some(by)) => !before(by),
                (true, None) => false,
            }
    }

    /// True when the deduction held stock at the cut: made at or before it, and not returned
    /// by then.
    pub fn active_at(&self, cut: EventId) -> bool {
        self.at <= cut
            && match (self.returned, self.returned_by) {
                (false, _) => true,
                (true, Some(by)) => by > cut,
                (true, None) => false,
            }
    }
}

/// The database truth of one product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Truth {
    pub initial: i64,
    pub db_sold: i64,
    pub in_flight: i64,
    pub orphaned: i64,
    pub expected_remaining: i64,
}

/// The stock the books owe: the initial stock less what live orders and deductions in flight
/// hold, below zero for an oversold product (where `expected_remaining` stops at zero). What a
/// rebuild writes, the preheat gate compares with, and the oversold alert names.
pub fn owed(initial: i64, db_sold: i64, in_flight: i64) -> i64 {
    initial.saturating_sub(db_sold).saturating_sub(in_flight)
}

impl Truth {
    /// [`owed`] of this truth.
    pub fn owed(&self) -> i64 {
        owed(self.initial, self.db_sold, self.in_flight)
    }

    /// `expected_remaining = initial - db_sold - in_flight`, never below 0.
    pub fn new(initial: i64, db_sold: i64, in_flight: i64, orphaned: i64) -> Self {
        Truth {
            initial,
            db_sold,
            in_flight,
            orphaned,
            expected_remaining: (initial - db_sold - in_flight).max(0),
        }
    }
}

/// A product's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Ok,
    Drift,
    Negative,
    Missing,
    Corrupt,
    Paused,
    /// More units are held by live orders and deductions in flight than the product ever had:
    /// sold twice, whatever Redis shows now.
    Oversold,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Drift => "drift",
            State::Negative => "negative",
            State::Missing => "missing",
            State::Corrupt => "corrupt",
            State::Paused => "paused",
            State::Oversold => "oversold",
        }
    }

    /// States that one-key fix repairs by rewriting the stock (an oversold product's stock is
    /// set so that nothing more sells: at or below zero).
    pub fn needs_rewrite(self) -> bool {
        matches!(
            self,
            State::Drift | State::Negative | State::Missing | State::Corrupt | State::Oversold
        )
    }
}

/// State and drift of a product. Oversold first (it is critical whatever Redis shows), then
/// what stops the scripts or the console from vouching for the figures: a corrupt value, then a
/// missing piece (the stock key, or any other piece in `lost`); then negative, then drift;
/// paused only when the numbers are right.
pub fn classify(
    stock: &StockValue,
    meta: &Meta,
    lost: &[Piece],
    truth: &Truth,
) -> (State, Option<i64>) {
    let drift = stock.value().map(|v| v - truth.expected_remaining);
    let state = if truth.db_sold.saturating_add(truth.in_flight) > truth.initial {
        State::Oversold
    } else {
        match stock {
            StockValue::Corrupt(_) | StockValue::WrongType(_) => State::Corrupt,
            StockValue::Missing => State::Missing,
            StockValue::Value(_) if meta.corrupt.is_some() => State::Corrupt,
            StockValue::Value(_) if !lost.is_empty() => State::Missing,
            StockValue::Value(v) if *v < 0 => State::Negative,
            StockValue::Value(_) if drift != Some(0) => State::Drift,
            StockValue::Value(_) if meta.paused => State::Paused,
            StockValue::Value(_) => State::Ok,
        }
    };
    let shown_drift = if matches!(state, State::Corrupt) {
        None
    } else {
        drift
    };
    (state, shown_drift)
}

/// What a missing piece makes of a product, for the operator.
pub fn lost_shown(lost: &[Piece]) -> String {
    let names: Vec<&str> = lost.iter().map(|p| p.described()).collect();
    names.join(", ")
}

/// One product as `status` and `reconcile` show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProductStatus {
    pub product: String,
    /// The product's name as imported (often in the shop's language); empty without one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub initial: i64,
    pub redis_remaining: Option<i64>,
    pub db_sold: i64,
    pub in_flight: i64,
    pub orphaned: i64,
    pub expected_remaining: i64,
    pub drift: Option<i64>,
    pub state: State,
    pub per_user_limit: i64,
    /// The limit the deduction enforces (the meta hash's); differs from `per_user_limit`
    /// after a re-import changed it, until a fix or a re-preheat writes it.
    pub redis_limit: Option<i64>,
    pub paused: bool,
    /// What is corrupt (the stock's raw text, or the meta hash) and what fails because of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt_value: Option<String>,
    /// Units sold per the ledger, for the sold-percentage gauge.
    pub sold_percent: f64,
    /// The stock's offset from the scripts' own counters (`stock - initial + deducted -
    /// returned`): units written outside the scripts. None when either is unreadable.
    pub offset: Option<i64>,
    /// Units of live orders for which Redis holds no deduction (lost with a restart or a
    /// failover): they count in `drift` as oversell risk.
    pub unledgered: i64,
    /// The pieces of the product's evidence Redis lost (a `missing` state names them).
    pub lost: Vec<Piece>,
    /// Units the counters hold that no ledger entry names (left by a rebuild after the ledger
    /// was lost): counted in flight until their orders had the grace window to land.
    pub unexplained: i64,
    /// The operator's pause as the database holds it (`paused` is Redis's), with its reason.
    pub db_paused: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pause_reason: String,
    /// A step another console left half done on this product (a top-up between its writes, a
    /// rebuild's hold), when it is older than such a step takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// The event stream lacks entries (deleted or trimmed): the last settle read the ledger.
    pub stream_gap: bool,
    /// What the shop's app servers did against the contract, with the requests behind it.
    /// Boxed: nearly every product has none, and 100,000 products' statuses carry it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<Box<Faults>>,
    /// The sale window Redis enforces (the meta hash's `opens`, `closes`, ms), when it is not
    /// the activity's (absent: a product preheated before the meta hash carried it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_window: Option<RedisWindow>,
}

/// The sale window a product's meta hash carries, each end absent when not there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RedisWindow {
    pub opens: Option<i64>,
    pub closes: Option<i64>,
}

impl ProductStatus {
    /// True when one-key fix would touch this product: its stock needs a rewrite or it holds
    /// orphaned deductions to return. The Reconcile view shows exactly these.
    pub fn needs_fix(&self) -> bool {
        self.state.needs_rewrite()
            || self.orphaned > 0
            || self.unledgered > 0
            || self.limit_differs().is_some()
            || self.window_differs()
    }

    /// True when Redis enforces another sale window than the activity's (a readable meta hash
    /// only, as for the limit).
    pub fn window_differs(&self) -> bool {
        self.redis_window.is_some() && !matches!(self.state, State::Missing | State::Corrupt)
    }

    /// The limit Redis enforces, when it is not the database's (a readable meta hash only:
    /// a missing or corrupt one is its own state).
    pub fn limit_differs(&self) -> Option<Option<i64>> {
        let readable = !matches!(self.state, State::Missing | State::Corrupt);
        (readable && self.redis_limit != Some(self.per_user_limit)).then_some(self.redis_limit)
    }

    /// The status of a product from what Redis holds (`stock`, `meta`, the pieces `lost`) and
    /// the database's truth.
    pub fn build(
        product: &str,
        per_user_limit: i64,
        (stock, meta, lost): (&StockValue, &Meta, &[Piece]),
        truth: Truth,
    ) -> Self {
        let (state, drift) = classify(stock, meta, lost, &truth);
        let corrupt_value = match stock {
            StockValue::Corrupt(raw) => Some(format!(
                "stock is '{}', not an integer: every deduction fails",
                shown(raw)
            )),
            StockValue::WrongType(t) => Some(format!(
                "the stock key is a {t}, not a string: every deduction fails"
            )),
            _ => meta.corrupt.clone(),
        };
        let sold_percent = if truth.initial > 0 {
            ((truth.db_sold as f64 / truth.initial as f64) * 1000.0).round() / 10.0
        } else {
            0.0
        };
        ProductStatus {
            product: product.to_string(),
            name: String::new(),
            initial: truth.initial,
            redis_remaining: if matches!(stock, StockValue::Value(_)) && meta.corrupt.is_none() {
                stock.value()
            } else {
                None
            },
            db_sold: truth.db_sold,
            in_flight: truth.in_flight,
            orphaned: truth.orphaned,
            expected_remaining: truth.expected_remaining,
            drift,
            state,
            per_user_limit,
            redis_limit: meta.limit,
            paused: meta.paused,
            corrupt_value,
            sold_percent,
            offset: None,
            unledgered: 0,
            lost: lost.to_vec(),
            unexplained: meta.unexplained,
            db_paused: false,
            pause_reason: String::new(),
            held: None,
            stream_gap: false,
            faults: None,
            redis_window: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            present: true,
            ..Meta::default()
        }
    }

    #[test]
    fn printable_escapes_control_and_bidi_characters_and_keeps_the_rest() {
        assert_eq!(printable("r1\u{1b}[2J"), "r1\\u{1b}[2J");
        assert_eq!(printable("a\u{202e}b\u{9b}"), "a\\u{202e}b\\u{9b}");
        assert_eq!(printable("夜间 r-1"), "夜间 r-1");
    }

    #[test]
    fn integers_follow_the_script_rules() {
        assert_eq!(parse_int(b"42"), Some(42));
        assert_eq!(parse_int(b"-3"), Some(-3));
        assert_eq!(parse_int(b"0"), Some(0));
        assert_eq!(parse_int(b"999999999999999"), Some(999_999_999_999_999));
        assert_eq!(parse_int(b"-999999999999999"), Some(-999_999_999_999_999));
        for bad in [
            &b""[..],
            b"1.5",
            b"abc",
            b" 1",
            b"1 ",
            b"-",
            b"01",
            b"00",
            b"-0",
            b"-01",
            b"+5",
            b"0x5",
            b"1e3",
            b"1000000000000000",
            b"12345678901234567",
        ] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn expected_never_below_zero() {
        assert_eq!(Truth::new(10, 8, 5, 0).expected_remaining, 0);
        assert_eq!(Truth::new(10, 3, 2, 4).expected_remaining, 5);
    }

    #[test]
    fn states() {
        let t = Truth::new(100, 10, 0, 0);
        assert_eq!(
            classify(&StockValue::Value(90), &meta(), &[], &t),
            (State::Ok, Some(0))
        );
        assert_eq!(
            classify(&StockValue::Value(97), &meta(), &[], &t),
            (State::Drift, Some(7))
        );
        assert_eq!(
            classify(&StockValue::Value(-3), &meta(), &[], &t),
            (State::Negative, Some(-93))
        );
        assert_eq!(
            classify(&StockValue::Missing, &meta(), &[], &t),
            (State::Missing, None)
        );
        assert_eq!(
            classify(&StockValue::Corrupt(b"abc".to_vec()), &meta(), &[], &t),
            (State::Corrupt, None)
        );
        assert_eq!(
            classify(&StockValue::WrongType("list".into()), &meta(), &[], &t).0,
            State::Corrupt
        );
        let paused = Meta {
            paused: true,
            ..meta()
        };
        assert_eq!(
            classify(&StockValue::Value(90), &paused, &[], &t),
            (State::Paused, Some(0))
        );
        assert_eq!(
            classify(&StockValue::Value(91), &paused, &[], &t).0,
            State::Drift
        );
        let bad_meta = Meta {
            corrupt: Some("x".into()),
            ..meta()
        };
        assert_eq!(
            classify(&StockValue::Value(90), &bad_meta, &[], &t).0,
            State::Corrupt
        );
        // A piece lost is never ok, even when the figures agree; the stock still shows.
        assert_eq!(
            classify(&StockValue::Value(90), &meta(), &[Piece::Buyers], &t),
            (State::Missing, Some(0))
        );
        // Sold beyond the stock: oversold, whatever Redis shows (here nothing left, no drift).
        let over = Truth::new(8, 10, 0, 0);
        assert_eq!(
            classify(&StockValue::Value(0), &meta(), &[], &over),
            (State::Oversold, Some(0))
        );
        let in_flight_over = Truth::new(10, 9, 2, 0);
        assert_eq!(
            classify(&StockValue::Missing, &meta(), &[], &in_flight_over).0,
            State::Oversold
        );
    }

    #[test]
    fn ledger_entries() {
        let e = LedgerEntry::parse("r1", b"d|2|1000-3|8|user|with|pipes").expect("valid");
        assert_eq!(
            (e.quantity, e.at, e.result, e.user.as_str()),
            (2, EventId { ms: 1000, seq: 3 }, 8, "user|with|pipes")
        );
        assert!(!e.returned);
        // At or before the cut it held stock; a cut before it did not see it.
        assert!(e.active_at(EventId { ms: 1000, seq: 3 }));
        assert!(!e.active_at(EventId { ms: 1000, seq: 2 }));
        let r = LedgerEntry::parse("r1", b"r@2000-0|2|1000-3|8|u").expect("returned");
        assert_eq!(r.returned_by, Some(EventId { ms: 2000, seq: 0 }));
        assert!(r.active_at(EventId { ms: 1999, seq: 9 }));
        assert!(!r.active_at(EventId { ms: 2000, seq: 0 }));
        // Written before the stream: a bare time, and a return before any cut.
        let old = LedgerEntry::parse("r1", b"r|2|1000|8|u").expect("old format");
        assert!(old.returned && old.returned_by.is_none());
        assert!(!old.active_at(EventId { ms: 5000, seq: 0 }));
        for bad in [
            &b"x|1|1|1|u"[..],
            b"garbage",
            b"r@x|1|1|1|u",
            b"d|0|1|1|u",
            b"d|1|1-x|1|u",
        ] {
            assert!(LedgerEntry::parse("r", bad).is_none(), "{bad:?}");
        }
    }

    /// Bytes that are often near a valid value: any bytes, numbers with or without a sign,
    /// leading zeros, spaces or 16 digits, and ledger records.
    fn near_valid() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let ledger = concat!(
            "(d|r|r@[0-9]{1,3}(-[0-9])?|x)",
            "\\|-?[0-9]{1,3}\\|[0-9]{1,4}(-[0-9])?\\|-?[0-9]{1,3}\\|[a-z|]{0,6}"
        );
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64),
            "[-+ ]?[0-9]{1,17} ?".prop_map(String::into_bytes),
            "[-+0-9 ]{0,4}".prop_map(String::into_bytes),
            "-?[0-9]".prop_map(String::into_bytes),
            ledger.prop_map(String::into_bytes),
        ]
    }

    proptest::proptest! {
        /// What the parsers accept holds the rules they enforce, whatever the bytes.
        #[test]
        fn parsed_values_keep_the_script_rules(
            raw in near_valid(),
            fields in proptest::collection::vec(proptest::option::of(near_valid()), 0..8),
            (initial, sold, in_flight) in (0i64..1000, 0i64..1000, 0i64..1000),
        ) {
            use proptest::{prop_assert, prop_assert_eq};
            // An integer is accepted in its one canonical form, within 15 digits.
            if let Some(v) = parse_int(&raw) {
                prop_assert_eq!(v.to_string().into_bytes(), raw.clone());
                prop_assert!(v.abs() <= 999_999_999_999_999);
            }
            // The compare-and-set guard matches exactly the bytes read.
            let stock = StockValue::from_raw(Some(&raw));
            prop_assert_eq!(stock.guard(), [b"=".as_slice(), &raw].concat());
            prop_assert_eq!(stock.value(), parse_int(&raw));
            // A ledger record: at least one unit, and written out again it reads the same.
            if let Some(e) = LedgerEntry::parse("r", &raw) {
                prop_assert!(e.quantity >= 1, "{:?}", e);
                prop_assert!(e.returned || e.returned_by.is_none(), "{:?}", e);
                let state = match (e.returned, e.returned_by) {
                    (false, _) => "d".to_string(),
                    (true, None) => "r".to_string(),
                    (true, Some(by)) => format!("r@{by}"),
                };
                let mut again = format!("{state}|{}|{}|{}|", e.quantity, e.at, e.result).into_bytes();
                again.extend_from_slice(&e.user_raw);
                prop_assert_eq!(LedgerEntry::parse("r", &again), Some(e));
            }
            // A meta hash without a corruption note has every field the scripts read usable.
            let m = Meta::from_fields(&fields);
            let field = |i: usize| fields.get(i).cloned().flatten();
            // A hash holding nothing but `rev` (a top-up's trace) is no meta yet.
            let rev = META_FIELDS.iter().position(|f| *f == "rev");
            prop_assert_eq!(
                m.present,
                fields.iter().enumerate().any(|(i, f)| f.is_some() && Some(i) != rev)
            );
            prop_assert_eq!(m.paused, field(2).as_deref() == Some(b"1".as_slice()));
            if m.corrupt.is_none() {
                prop_assert!(m.limit.is_none_or(|l| l >= 1), "{:?}", m);
                prop_assert!(field(2).is_none_or(|p| p == b"0" || p == b"1"), "{:?}", m);
                prop_assert_eq!(m.deducted.is_some(), field(3).is_some());
                prop_assert_eq!(m.returned.is_some(), field(4).is_some());
            }
            // Status: a corrupt product shows no remaining stock and says why; otherwise the
            // drift is what Redis holds beyond the truth.
            let t = Truth::new(initial, sold, in_flight, 0);
            prop_assert!(t.expected_remaining >= 0);
            let st = ProductStatus::build("p", 1, (&stock, &m, &[]), t);
            if st.state == State::Corrupt {
                prop_assert_eq!(st.redis_remaining, None);
                prop_assert!(st.corrupt_value.is_some(), "{:?}", st);
            } else if st.state != State::Oversold {
                let v = stock.value().expect("a value when not corrupt");
                prop_assert_eq!(st.redis_remaining, Some(v));
                prop_assert_eq!(st.drift, Some(v - t.expected_remaining));
            }
            // Sold beyond the stock is never anything but oversold.
            prop_assert_eq!(st.state == State::Oversold, sold + in_flight > initial);
        }

        #[test]
        fn integers_round_trip(v in -999_999_999_999_999i64..999_999_999_999_999) {
            proptest::prop_assert_eq!(parse_int(v.to_string().as_bytes()), Some(v));
        }
    }
}
