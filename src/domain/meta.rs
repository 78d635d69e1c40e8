//! The meta hash of a product as the console reads it, the markers other consoles leave in it
//! (a rebuild's hold, a top-up between its two writes), and the pieces of a product's evidence
//! that can go missing. No I/O.

use super::stock::{parse_int, shown};
use serde::Serialize;

/// The meta hash of a product.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// False when the hash does not exist (or holds nothing but `rev`).
    pub present: bool,
    /// Set when the key has the wrong type or a field the scripts read is not an integer: what
    /// is wrong, and what fails because of it.
    pub corrupt: Option<String>,
    /// None when absent or not an integer (the scripts never read it; preheat compares it).
    pub initial: Option<i64>,
    pub limit: Option<i64>,
    pub paused: bool,
    /// `paused` holds neither 0 nor 1 (a corrupt value stops every sale): not an intent
    /// anybody recorded, so a repair writes the database's pause over it.
    pub pause_unreadable: bool,
    pub deducted: Option<i64>,
    pub returned: Option<i64>,
    /// `deducted` or `returned` is there but not an integer, or they hold what no script
    /// writes (more returned than deducted, a count below zero): the counters cannot say what
    /// is held (another unreadable field, a `limit` of `1.5`, leaves them exact).
    pub counters_unreadable: bool,
    /// Console rewrites so far, as read (an integer, 0 when absent or unreadable).
    pub rev: i64,
    /// `rev` exactly as stored (empty when absent): the guard every console write sends, so a
    /// write whose read is stale is refused by its script.
    pub rev_raw: Vec<u8>,
    /// When the product's keys expire, ms since the epoch (set by preheat).
    pub expire_at: Option<i64>,
    /// The generation of the last pause or resume written here (0: none).
    pub pause_gen: i64,
    /// A top-up between its two writes.
    pub topup: Option<TopupMarker>,
    /// A rebuild holding the product.
    pub frozen: Option<FrozenMarker>,
    /// Units the counters hold that no ledger entry names (a rebuild after the ledger was lost:
    /// deductions whose orders may still land), and since when (ms).
    pub unexplained: i64,
    pub unexplained_since: Option<i64>,
    /// The buyers' holdings include the unexplained units (a rebuild whose buyers hash
    /// survived); false when they do not, or may not.
    pub unexplained_held: bool,
    /// The sale window the deduction enforces (`opens`, `closes`, ms), each when present and
    /// an integer (a value that is not makes every deduction fail: `corrupt` says so).
    pub opens: Option<i64>,
    pub closes: Option<i64>,
}

/// The fields read from the meta hash, in HMGET order.
pub const META_FIELDS: [&str; 15] = [
    "initial",
    "limit",
    "paused",
    "deducted",
    "returned",
    "rev",
    "expire_at",
    "pause_gen",
    "topup",
    "frozen",
    "unexplained",
    "unexplained_since",
    "unexplained_held",
    "opens",
    "closes",
];

/// `topup` = `<id>|<change>|<ms>`: a top-up whose database write is pending or whose console
/// died between its two writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopupMarker {
    pub id: String,
    pub change: i64,
    /// When it began (Redis time, ms).
    pub at_ms: i64,
}

impl TopupMarker {
    pub fn parse(raw: &[u8]) -> Option<Self> {
        let s = std::str::from_utf8(raw).ok()?;
        let mut parts = s.splitn(3, '|');
        let id = parts.next()?.to_string();
        let change = parse_int(parts.next()?.as_bytes())?;
        let at_ms = parts.next()?.parse().ok()?;
        (!id.is_empty()).then_some(TopupMarker { id, change, at_ms })
    }
}

/// `frozen` = `<token>|<what the stock held>|<ms>`: a rebuild holds the product (its stock key is
/// gone until the rebuild writes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrozenMarker {
    pub token: String,
    /// What the stock key held when the hold began (empty: absent).
    pub value: Vec<u8>,
    pub at_ms: i64,
}

impl FrozenMarker {
    pub fn parse(raw: &[u8]) -> Option<Self> {
        let first = raw.iter().position(|b| *b == b'|')?;
        let last = raw.iter().rposition(|b| *b == b'|')?;
        if last <= first {
            return None;
        }
        let token = std::str::from_utf8(&raw[..first]).ok()?.to_string();
        let at_ms = std::str::from_utf8(&raw[last + 1..]).ok()?.parse().ok()?;
        Some(FrozenMarker {
            token,
            value: raw[first + 1..last].to_vec(),
            at_ms,
        })
    }

    /// The stock value the hold keeps, when it was an integer.
    pub fn stock(&self) -> Option<i64> {
        parse_int(&self.value)
    }
}

impl Meta {
    /// Builds the meta from the HMGET reply of [`META_FIELDS`].
    pub fn from_fields(fields: &[Option<Vec<u8>>]) -> Self {
        let get = |i: usize| fields.get(i).and_then(Option::as_ref);
        let mut corrupt = None;
        // A field the scripts read: one that is not an integer makes them fail (`what`).
        let mut script_field = |i: usize, name: &str, what: &str| -> Option<i64> {
            let raw = get(i)?;
            let v = parse_int(raw);
            if v.is_none() && corrupt.is_none() {
                corrupt = Some(format!("meta field {name} is '{}': {what}", shown(raw)));
            }
            v
        };
        let limit = script_field(1, "limit", "every deduction fails");
        let deducted = script_field(3, "deducted", "every deduction fails");
        let returned = script_field(4, "returned", "every return of stock fails");
        // Counters no script writes (more returned than deducted, or below zero) are no
        // better than unreadable: taken at their word they would release held units.
        let counters_unreadable = (get(3).is_some() && deducted.is_none())
            || (get(4).is_some() && returned.is_none())
            || deducted.is_some_and(|d| d < 0)
            || returned.is_some_and(|r| r < 0)
            || matches!((deducted, returned), (Some(d), Some(r)) if r > d);
        let unexplained = script_field(10, "unexplained", "every recording of a sale fails");
        let opens = script_field(13, "opens", "every deduction fails");
        let closes = script_field(14, "closes", "every deduction fails");
        if limit.is_some_and(|l| l < 1) && corrupt.is_none() {
            corrupt = Some("meta field limit is below 1: every deduction fails".into());
        }
        if unexplained.is_some_and(|u| u < 0) && corrupt.is_none() {
            corrupt = Some("meta field unexplained is below 0".into());
        }
        // deduct.lua reads `paused` as 0 or 1 and refuses anything else.
        if let Some(p) = get(2)
            && !matches!(p.as_slice(), b"0" | b"1")
            && corrupt.is_none()
        {
            corrupt = Some(format!(
                "meta field paused is '{}': every deduction fails",
                shown(p)
            ));
        }
        Meta {
            // A hash that holds only `rev` is the trace a top-up's marker leaves on a product
            // without keys (its guard for the writers that read before it): no meta yet.
            present: fields
                .iter()
                .enumerate()
                .any(|(i, f)| f.is_some() && META_FIELDS.get(i) != Some(&"rev")),
            corrupt,
            initial: get(0).and_then(|raw| parse_int(raw)),
            limit,
            paused: get(2).is_some_and(|v| v.as_slice() == b"1"),
            pause_unreadable: get(2).is_some_and(|v| !matches!(v.as_slice(), b"0" | b"1")),
            deducted,
            returned,
            counters_unreadable,
            rev: get(5).and_then(|raw| parse_int(raw)).unwrap_or(0),
            rev_raw: get(5).cloned().unwrap_or_default(),
            expire_at: get(6).and_then(|raw| parse_int(raw)),
            pause_gen: get(7).and_then(|raw| parse_int(raw)).unwrap_or(0).max(0),
            topup: get(8).and_then(|raw| TopupMarker::parse(raw)),
            frozen: get(9).map(|raw| {
                FrozenMarker::parse(raw).unwrap_or(FrozenMarker {
                    token: String::new(),
                    value: Vec::new(),
                    at_ms: 0,
                })
            }),
            unexplained: unexplained.unwrap_or(0).max(0),
            unexplained_since: get(11).and_then(|raw| parse_int(raw)),
            unexplained_held: get(12).is_some_and(|v| v.as_slice() == b"1"),
            opens,
            closes,
        }
    }

    /// True when the window the deduction enforces is not `window` (the activity's).
    pub fn window_differs(&self, window: &super::SaleWindow) -> bool {
        self.opens != Some(window.opens_ms) || self.closes != Some(window.closes_ms)
    }

    /// Units the scripts hold as deducted and not returned, when the counters are readable.
    pub fn active_units(&self) -> Option<i64> {
        match (self.deducted, self.returned) {
            (Some(d), Some(r)) => d.checked_sub(r),
            (Some(d), None) => Some(d),
            (None, Some(_)) => None,
            (None, None) => Some(0),
        }
    }
}

/// The pause fields a write of the meta hash carries: the database's pause, or its resume when
/// it is newer than Redis's. A pause Redis holds that the database never recorded (by hand, or
/// an older console) is kept: a repair never puts a paused product back on sale. Empty when
/// Redis already says what it should.
pub fn pause_fields(p: &super::Product, m: &Meta) -> Vec<(&'static str, String)> {
    let fields = |paused: &str, generation: i64| {
        vec![
            ("paused", paused.to_string()),
            ("pause_gen", generation.to_string()),
        ]
    };
    if m.pause_unreadable {
        // Whatever generation stands beside it, the corrupt value is nobody's pause: the
        // database's word, at a generation the script cannot call older than its own.
        let paused = if p.pause.paused { "1" } else { "0" };
        return fields(paused, p.pause.generation.max(m.pause_gen));
    }
    let redis_newer = m.pause_gen >= p.pause.generation;
    match (p.pause.paused, m.paused) {
        (true, true) if redis_newer => Vec::new(),
        // Pausing is always safe: it wins over whatever generation Redis holds.
        (true, _) => fields("1", p.pause.generation.max(m.pause_gen)),
        // An unrecorded pause stays.
        (false, true) if redis_newer => Vec::new(),
        (false, false) if redis_newer && m.present => Vec::new(),
        (false, _) => fields("0", p.pause.generation),
    }
}

/// A piece of a product's evidence that Redis lost: each makes the scripts refuse to sell (or
/// the console unable to vouch for the figures) until a fix or a preheat rebuilds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Piece {
    /// The stock key.
    Stock,
    /// The meta hash.
    Meta,
    /// The meta hash's `limit` (the hash recreated by a stray write).
    Limit,
    /// The meta hash's counters (`deducted`, `returned`), after sales.
    Counters,
    /// The buyers hash (per-user holdings, so the limits).
    Buyers,
    /// The ledger hash (per-request records, so retries and returns).
    Ledger,
    /// The event stream.
    Events,
    /// The operator's pause: the database says paused, Redis sells.
    Pause,
}

impl Piece {
    pub fn as_str(self) -> &'static str {
        match self {
            Piece::Stock => "stock",
            Piece::Meta => "meta",
            Piece::Limit => "limit",
            Piece::Counters => "counters",
            Piece::Buyers => "buyers",
            Piece::Ledger => "ledger",
            Piece::Events => "events",
            Piece::Pause => "pause",
        }
    }

    /// How an operator reads it.
    pub fn described(self) -> &'static str {
        match self {
            Piece::Stock => "the stock key",
            Piece::Meta => "the meta hash",
            Piece::Limit => "the meta hash's per-user limit",
            Piece::Counters => "the meta hash's counters",
            Piece::Buyers => "the buyers hash (per-user holdings)",
            Piece::Ledger => "the ledger (per-request records)",
            Piece::Events => "the event stream",
            Piece::Pause => "the operator's pause",
        }
    }

    /// Pieces whose loss a rebuild repairs (every one but the pause, which any write of the
    /// meta hash puts back).
    pub fn needs_rebuild(self) -> bool {
        self != Piece::Pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_no_script_writes_are_unreadable() {
        let meta = |deducted: &str, returned: Option<&str>| {
            let mut f: Vec<Option<Vec<u8>>> = vec![None; META_FIELDS.len()];
            f[1] = Some(b"1.5".to_vec());
            f[3] = Some(deducted.as_bytes().to_vec());
            f[4] = returned.map(|r| r.as_bytes().to_vec());
            Meta::from_fields(&f)
        };
        // Another field corrupt: the counters still say what is held.
        let m = meta("33", Some("14"));
        assert!(m.corrupt.is_some() && !m.counters_unreadable);
        assert_eq!(m.active_units(), Some(19));
        assert!(!meta("33", None).counters_unreadable);
        for (d, r) in [
            ("33", Some("x")),
            ("x", Some("1")),
            ("3", Some("5")),
            ("3", Some("-1")),
            ("-1", None),
        ] {
            assert!(meta(d, r).counters_unreadable, "{d} {r:?}");
        }
    }

    #[test]
    fn markers_read_what_the_scripts_write() {
        let t = TopupMarker::parse(b"1700-ab|-20|1700000").expect("marker");
        assert_eq!(
            (t.id.as_str(), t.change, t.at_ms),
            ("1700-ab", -20, 1_700_000)
        );
        assert!(TopupMarker::parse(b"|5|1").is_none());
        assert!(TopupMarker::parse(b"x|05|1").is_none());
        let f = FrozenMarker::parse(b"tok|12|99").expect("marker");
        assert_eq!(
            (f.token.as_str(), f.stock(), f.at_ms),
            ("tok", Some(12), 99)
        );
        // What the stock held may itself hold bars.
        let f = FrozenMarker::parse(b"tok|a|b|99").expect("marker");
        assert_eq!((f.value.as_slice(), f.stock()), (&b"a|b"[..], None));
        assert!(FrozenMarker::parse(b"tok|99").is_none());
    }

    /// A pause the database holds, or its resume, is written over a `paused` that is neither
    /// 0 nor 1 whatever generation stands beside it; a readable pause of the same generation
    /// is left alone.
    #[test]
    fn a_corrupt_pause_takes_the_databases_word() {
        let f = |s: &str| Some(s.as_bytes().to_vec());
        let mut fields = vec![None; META_FIELDS.len()];
        fields[1] = f("2");
        fields[2] = f("yes");
        fields[7] = f("9");
        let m = Meta::from_fields(&fields);
        assert!(m.pause_unreadable && !m.paused);
        let mut p = crate::domain::Product::new(
            crate::domain::ProductId::parse("p1").expect("id"),
            "p1",
            10,
            2,
        );
        p.pause.generation = 3;
        assert_eq!(
            pause_fields(&p, &m),
            vec![("paused", "0".to_string()), ("pause_gen", "9".to_string())]
        );
        p.pause.paused = true;
        assert_eq!(pause_fields(&p, &m)[0], ("paused", "1".to_string()));
        fields[2] = f("0");
        let m = Meta::from_fields(&fields);
        assert!(!m.pause_unreadable);
        p.pause.paused = false;
        assert!(pause_fields(&p, &m).is_empty());
    }

    #[test]
    fn meta_fields() {
        let f = |s: &str| Some(s.as_bytes().to_vec());
        let mut fields = vec![f("10"), f("2"), f("1"), f("4"), None];
        fields.resize(META_FIELDS.len(), None);
        let m = Meta::from_fields(&fields);
        assert!(m.present && m.paused);
        assert_eq!(
            (m.initial, m.limit, m.active_units()),
            (Some(10), Some(2), Some(4))
        );
        let m = Meta::from_fields(&[None, f("two"), None, None, None]);
        assert_eq!(
            m.corrupt.as_deref(),
            Some("meta field limit is 'two': every deduction fails")
        );
        let m = Meta::from_fields(&[None, f("2"), None, f("1"), f("x")]);
        assert_eq!(
            m.corrupt.as_deref(),
            Some("meta field returned is 'x': every return of stock fails")
        );
        // The scripts never read `initial`: a bad one is no corruption, only no value.
        let m = Meta::from_fields(&[f("ten"), f("2"), None, None, None]);
        assert_eq!((m.corrupt, m.initial), (None, None));
        let m = Meta::from_fields(&[None, None, None, None, None]);
        assert!(!m.present);
        // The guard is the stored bytes, whatever they are.
        let mut fields = vec![None; META_FIELDS.len()];
        fields[5] = f("abc");
        let m = Meta::from_fields(&fields);
        assert_eq!((m.rev, m.rev_raw.as_slice()), (0, &b"abc"[..]));
        // Counters that would overflow are unreadable, not a panic.
        let m = Meta::from_fields(&[
            None,
            None,
            None,
            f("-999999999999999"),
            f("999999999999999"),
        ]);
        assert!(m.active_units().is_some());
    }
}
