//! Readers of one activity sharing their safety reads (issue 57: three consoles and an exporter
//! cost about what one does).
//!
//! With Redis's pushes ([`super::changes`]), a settled live view reads a product only when Redis
//! names one of its keys, and, as a safety net for what nobody expects to be missed, each
//! product once every ten minutes in turns (at 100,000 products, 167 products a second: nearly
//! all of a quiet reader's commands). Four readers each reading that net themselves cost four
//! times one. What a reader learns from a product read whole is its cut; if another reader's
//! cut of the same product, read later than its own, is the same, its own still stands, and it
//! need not read it again for its net. So the readers that may publish (not `--read-only`: a
//! PUBLISH writes no key, but a read-only console sends nothing but reads) publish a digest of
//! each product their net read, on a channel of the activity, and every reader listens: a
//! digest equal to its own cut's counts as its own read; one that differs has it read the
//! product itself at once (a write it was not told of).
//!
//! Who reads what: the net's turns are counted from the same instant by every reader (a
//! multiple of the period on the wall clock), so a product falls due at once for all of them;
//! the readers that publish say so every few seconds, and the products due in one second of
//! the wall clock are the turn of one of them (one read and one message a second in all, not
//! one per reader). The others wait [`GRACE`] for the digests and read a product themselves if
//! none came (its reader stopped, a message lost): the net holds for each reader whatever the
//! others do. A reader alone, or one that hears nobody, reads every product itself, as before.
//! The bounded sweep of the ledgers and buyers hashes (the live view's integrity sweep) is shared
//! the same way, by the products' lanes: each reader sweeps its share at its share of the
//! pace, and tells the unreadable entries it finds, which the others then read themselves.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a reader whose turn it is not waits for another's digest of a product that fell
/// due before reading it itself.
pub const GRACE: Duration = Duration::from_secs(5);

/// How often a reader that publishes says so, and how long one unheard counts as gone.
const HELLO_EVERY: Duration = Duration::from_secs(5);
const GONE_AFTER: Duration = Duration::from_secs(15);

/// The most digests in one message (about 30 bytes each).
const DIGESTS_A_MESSAGE: usize = 2_000;

/// A message longer than any this build sends (a stray or hostile PUBLISH) is not read.
pub const MAX_MESSAGE: usize = 64 * 1024 + DIGESTS_A_MESSAGE * 160;

/// The channel of an activity's readers. The version is in the name: a digest is made by this
/// build's [`digest`], and readers of another version neither share nor mistake theirs.
pub fn channel(key_prefix: &str, activity: &str) -> String {
    format!(
        "{key_prefix}:{{{activity}}}:readers:{}",
        env!("CARGO_PKG_VERSION")
    )
}

/// FNV-1a of `bytes`: the same in every reader of one build, cheap, and enough to tell two cuts
/// of one product apart (a collision would only leave a product to the next push or net turn).
pub fn digest(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// One message heard on the channel.
#[derive(Debug, PartialEq, Eq)]
pub enum Heard {
    /// A reader that publishes is there.
    Hello(u64),
    /// A reader's cuts of these products (id, digest), read whole just before.
    Cuts(u64, Vec<(String, u64)>),
    /// A reader's sweep found an unreadable entry: the product, which hash (`'l'`edger or
    /// `'b'`uyers) and the field.
    Bad(u64, Bad),
}

/// An unreadable entry one reader's sweep found, for the others to read themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bad {
    pub product: String,
    /// `'l'`: the ledger; `'b'`: the buyers hash.
    pub hash: char,
    pub field: String,
}

/// Reads a message; None for anything else (another build, a stray PUBLISH: nothing in it is
/// trusted beyond "this product may have moved", which at worst costs a read).
pub fn parse(payload: &[u8]) -> Option<Heard> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut words = text.split(' ');
    let from = u64::from_str_radix(words.next()?, 16).ok()?;
    match words.next()? {
        "hi" => Some(Heard::Hello(from)),
        "bad" => {
            let product = words.next()?;
            let hash = match words.next()? {
                "l" => 'l',
                "b" => 'b',
                _ => return None,
            };
            let field = unhex(words.next()?)?;
            (!product.is_empty() && product.len() <= 128).then(|| {
                Heard::Bad(
                    from,
                    Bad {
                        product: product.to_string(),
                        hash,
                        field,
                    },
                )
            })
        }
        "cuts" => {
            let mut cuts = Vec::new();
            for w in words {
                let (id, d) = w.split_once('=')?;
                if id.is_empty() || id.len() > 128 {
                    return None;
                }
                cuts.push((id.to_string(), u64::from_str_radix(d, 16).ok()?));
            }
            Some(Heard::Cuts(from, cuts))
        }
        _ => None,
    }
}

/// The messages that say `cuts`, each under [`DIGESTS_A_MESSAGE`].
pub fn cuts_messages(me: u64, cuts: &[(&str, u64)]) -> Vec<String> {
    cuts.chunks(DIGESTS_A_MESSAGE)
        .map(|chunk| {
            let mut m = format!("{me:016x} cuts");
            for (id, d) in chunk {
                m.push(' ');
                m.push_str(id);
                m.push('=');
                m.push_str(&format!("{d:016x}"));
            }
            m
        })
        .collect()
}

/// The message that tells `bad` (its field in hex: a field may hold any byte).
pub fn bad_message(me: u64, bad: &Bad) -> String {
    let hex: String = bad.field.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{me:016x} bad {} {} {hex}", bad.product, bad.hash)
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) || s.len() > 2_048 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

pub fn hello_message(me: u64) -> String {
    format!("{me:016x} hi")
}

/// Whose turn each lane of products is, at one instant.
#[derive(Clone, Debug)]
pub struct Turns {
    /// The readers that publish, this one among them if it does; empty: this reader is alone.
    all: Vec<u64>,
    me: u64,
}

impl Turns {
    /// The readers sharing the work, this one among them (1: alone).
    pub fn sharing(&self) -> usize {
        self.all.len().max(1)
    }

    /// Whether this reader does the work of `lane` (a product's lane, or a second on the
    /// wall clock) itself: its turn among the readers that publish, or no other reader was
    /// heard.
    pub fn mine(&self, lane: u64) -> bool {
        if self.all.is_empty() {
            return true;
        }
        self.all[(lane % self.all.len() as u64) as usize] == self.me
    }
}

/// What a reader knows of the others.
#[derive(Debug)]
pub struct Round {
    me: u64,
    /// This reader publishes its net's digests (not read-only).
    publishes: bool,
    /// The readers that publish, heard last at.
    peers: HashMap<u64, Instant>,
    last_hello: Option<Instant>,
}

impl Round {
    pub fn new(publishes: bool) -> Self {
        // Any number no other reader draws: the time and the process mixed.
        let seed = format!(
            "{:?}{}{:?}",
            std::time::SystemTime::now(),
            std::process::id(),
            Instant::now()
        );
        Round {
            me: digest(seed.as_bytes()),
            publishes,
            peers: HashMap::new(),
            last_hello: None,
        }
    }

    pub fn me(&self) -> u64 {
        self.me
    }

    pub fn publishes(&self) -> bool {
        self.publishes
    }

    /// Notes a message's sender as there (its own messages come back too, and are left out).
    pub fn heard_from(&mut self, from: u64, at: Instant) {
        if from != self.me {
            self.peers.insert(from, at);
        }
    }

    /// A hello is due (the reader publishes and said nothing for [`HELLO_EVERY`]).
    pub fn hello_due(&self, now: Instant) -> bool {
        self.publishes
            && self
                .last_hello
                .is_none_or(|t| now.saturating_duration_since(t) >= HELLO_EVERY)
    }

    /// Notes that this reader said something (any message says it is there).
    pub fn said(&mut self, now: Instant) {
        self.last_hello = Some(now);
    }

    /// Whether this reader now publishes (a store may turn read-only between two reads).
    pub fn set_publishes(&mut self, publishes: bool) {
        self.publishes = publishes;
    }

    /// Whose turn each lane is now, among the readers heard lately.
    pub fn turns(&mut self, now: Instant) -> Turns {
        self.peers
            .retain(|_, at| now.saturating_duration_since(*at) < GONE_AFTER);
        let mut all: Vec<u64> = self.peers.keys().copied().collect();
        if !all.is_empty() && self.publishes {
            all.push(self.me);
        }
        all.sort_unstable();
        Turns { all, me: self.me }
    }

    /// Peers heard lately.
    pub fn peers(&self) -> usize {
        self.peers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_back_and_strays_are_ignored() {
        let me = 0xabc;
        let ms = cuts_messages(me, &[("p1", 7), ("p-2.x", u64::MAX)]);
        assert_eq!(ms.len(), 1);
        assert_eq!(
            parse(ms[0].as_bytes()),
            Some(Heard::Cuts(
                me,
                vec![("p1".into(), 7), ("p-2.x".into(), u64::MAX)]
            ))
        );
        assert_eq!(parse(hello_message(5).as_bytes()), Some(Heard::Hello(5)));
        for stray in [
            "",
            "hello",
            "zz hi",
            "0a cuts p1",
            "0a cuts p1=zz",
            "0a bye",
            "\u{1b}[2J",
        ] {
            assert_eq!(parse(stray.as_bytes()), None, "{stray:?}");
        }
        assert_eq!(parse(b"\xff\xfe"), None);
        let bad = Bad {
            product: "p1".into(),
            hash: 'b',
            field: "user 7\u{1b}".into(),
        };
        assert_eq!(
            parse(bad_message(9, &bad).as_bytes()),
            Some(Heard::Bad(9, bad))
        );
        assert_eq!(parse(b"09 bad p1 x 41"), None);
        assert_eq!(parse(b"09 bad p1 l 4"), None);
        let many: Vec<(String, u64)> = (0..4_500).map(|i| (format!("p{i}"), i)).collect();
        let refs: Vec<(&str, u64)> = many.iter().map(|(s, d)| (s.as_str(), *d)).collect();
        let ms = cuts_messages(1, &refs);
        assert_eq!(ms.len(), 3);
        let back: usize = ms
            .iter()
            .map(|m| match parse(m.as_bytes()) {
                Some(Heard::Cuts(_, c)) => c.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(back, 4_500);
    }

    #[test]
    fn each_lane_has_one_reader_and_a_reader_alone_reads_all() {
        let now = Instant::now();
        let mut a = Round::new(true);
        let mut b = Round::new(true);
        let mut ro = Round::new(false);
        // Nobody heard: each reads everything.
        assert!((0..10).all(|l| a.turns(now).mine(l) && ro.turns(now).mine(l)));
        for r in [&mut a, &mut ro] {
            r.heard_from(b.me(), now);
        }
        let a_me = a.me();
        b.heard_from(a_me, now);
        ro.heard_from(a_me, now);
        for lane in 0..100 {
            // Exactly one of the two that publish; never the read-only one.
            assert!(
                a.turns(now).mine(lane) != b.turns(now).mine(lane),
                "lane {lane}"
            );
            assert!(!ro.turns(now).mine(lane));
        }
        // Its own messages do not count as a peer.
        let mut c = Round::new(true);
        let c_me = c.me();
        c.heard_from(c_me, now);
        assert_eq!(c.peers(), 0);
        // Gone after a silence: alone again.
        let later = now + GONE_AFTER + Duration::from_secs(1);
        assert!((0..10).all(|l| a.turns(later).mine(l)));
    }
}
