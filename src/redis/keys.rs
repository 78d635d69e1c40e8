//! Every Redis key name the console and the shop's services use is built here, and nowhere else.
//!
//! A product's keys share the hash tag `{<activity>:<product>}`, so one script touches one slot
//! and the products of an activity spread over a cluster.

use crate::domain::{ActivityId, ProductId};
use crate::error::{Error, Result};

/// The default live prefix.
pub const DEFAULT_PREFIX: &str = "seckill";

/// The suffixes of one product's keys, in the order the scripts take them as KEYS.
pub const SUFFIXES: [&str; 6] = ["stock", "meta", "buyers", "ledger", "events", "books"];

/// The lock key of the `lock` strategy (dry runs only).
pub const LOCK_SUFFIX: &str = "lock";

/// A key prefix, validated so it can never widen a SCAN pattern or break a hash tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySpace {
    prefix: String,
}

impl Default for KeySpace {
    fn default() -> Self {
        KeySpace {
            prefix: DEFAULT_PREFIX.to_string(),
        }
    }
}

impl KeySpace {
    /// Validates a prefix: 1 to 64 of `A-Z a-z 0-9 _ - . :`.
    pub fn new(prefix: &str) -> Result<Self> {
        let ok = !prefix.is_empty()
            && prefix.len() <= 64
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
        if !ok {
            return Err(Error::bad_input(format!(
                "key prefix '{prefix}' is invalid: use 1 to 64 characters from A-Z a-z 0-9 _ - . :"
            )));
        }
        Ok(KeySpace {
            prefix: prefix.to_string(),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The hash tag of one product, braces included.
    pub fn tag(activity: &ActivityId, product: &ProductId) -> String {
        format!("{{{activity}:{product}}}")
    }

    /// All keys of one product.
    pub fn product(&self, activity: &ActivityId, product: &ProductId) -> ProductKeys {
        let base = format!("{}:{}", self.prefix, Self::tag(activity, product));
        let key = |suffix: &str| {
            let mut k = String::with_capacity(base.len() + 1 + suffix.len());
            k.push_str(&base);
            k.push(':');
            k.push_str(suffix);
            k
        };
        ProductKeys(std::sync::Arc::new(ProductKeyNames {
            product: product.to_string(),
            stock: key("stock"),
            meta: key("meta"),
            buyers: key("buyers"),
            ledger: key("ledger"),
            events: key("events"),
            books: key("books"),
            lock: key(LOCK_SUFFIX),
        }))
    }

    /// The SCAN pattern that matches every key of `activity` and no other activity's: ids cannot
    /// contain `:` or glob characters, so `{a1:` never matches `{a10:` or `{a1-b:`.
    pub fn activity_pattern(&self, activity: &ActivityId) -> String {
        format!("{}:{{{activity}:*", self.prefix)
    }

    /// Splits a key of this key space into activity, product and suffix. None for foreign keys.
    pub fn parse<'k>(&self, key: &'k str) -> Option<(&'k str, &'k str, &'k str)> {
        let rest = key.strip_prefix(self.prefix.as_str())?.strip_prefix(":{")?;
        let close = rest.find('}')?;
        let (tag, tail) = rest.split_at(close);
        let (activity, product) = tag.split_once(':')?;
        let suffix = tail.strip_prefix("}:")?;
        Some((activity, product, suffix))
    }
}

/// The keys of one product of one activity, shared: a live view hands the same keys to every
/// refresh (building them again was an eighth of its CPU on 10,000 quiet products), and a
/// clone is a count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProductKeys(std::sync::Arc<ProductKeyNames>);

impl std::ops::Deref for ProductKeys {
    type Target = ProductKeyNames;

    fn deref(&self) -> &ProductKeyNames {
        &self.0
    }
}

/// The names of a product's keys.
#[derive(Debug, PartialEq, Eq)]
pub struct ProductKeyNames {
    /// The product these keys belong to.
    pub product: String,
    /// String, an integer: remaining stock.
    pub stock: String,
    /// Hash: initial, limit, paused, deducted, returned, rev (console rewrites), expire_at;
    /// epoch and token-bucket figures (preheat), fixed_at (fix).
    pub meta: String,
    /// Hash: user id -> units the user holds.
    pub buyers: String,
    /// Hash: request id -> deduction record.
    pub ledger: String,
    /// Stream: every change of the product's books in order (deductions, returns, the
    /// console's corrections); the index the console reads big histories from, in pages.
    pub events: String,
    /// Hash: the console's checkpoint of the product's books (what it had reconciled, and
    /// up to where); written by the console only, read by the next console to start there.
    pub books: String,
    /// String: the lock of the `lock` strategy (dry runs only; app servers never use it).
    pub lock: String,
}

impl ProductKeyNames {
    /// The KEYS argument of every product script (deduct, restore, set_stock, record).
    pub fn script_keys(&self) -> [&str; 5] {
        [
            &self.stock,
            &self.meta,
            &self.buyers,
            &self.ledger,
            &self.events,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::slots::key_slot;

    fn ids(a: &str, p: &str) -> (ActivityId, ProductId) {
        (
            ActivityId::parse(a).expect("valid"),
            ProductId::parse(p).expect("valid"),
        )
    }

    #[test]
    fn names_carry_the_hash_tag() {
        let (a, p) = ids("a1", "p1");
        let k = KeySpace::default().product(&a, &p);
        assert_eq!(k.stock, "seckill:{a1:p1}:stock");
        assert_eq!(k.ledger, "seckill:{a1:p1}:ledger");
    }

    #[test]
    fn pattern_does_not_match_neighbours() {
        let (a, _) = ids("a1", "p");
        let pat = KeySpace::default().activity_pattern(&a);
        assert_eq!(pat, "seckill:{a1:*");
        for other in ["a10", "a1-b", "b1"] {
            let (o, p) = ids(other, "p1");
            let key = KeySpace::default().product(&o, &p).stock.clone();
            assert!(!key.starts_with(pat.trim_end_matches('*')), "{key}");
        }
    }

    #[test]
    fn parse_round_trips() {
        let (a, p) = ids("a-1", "P_2");
        let ks = KeySpace::new("dry.run:x").expect("valid prefix");
        let k = ks.product(&a, &p);
        assert_eq!(ks.parse(&k.meta), Some(("a-1", "P_2", "meta")));
        assert_eq!(ks.parse("seckill:{a:b}:stock"), None);
    }

    proptest::proptest! {
        /// Every key of a product parses back into its activity, product and suffix, matches
        /// the activity's SCAN pattern, and all of them hash to one cluster slot.
        #[test]
        fn product_keys_parse_back_and_share_one_slot(
            prefix in "[A-Za-z0-9_.:-]{1,64}",
            activity in "[A-Za-z0-9_-]{1,64}",
            product in "[A-Za-z0-9_-]{1,64}",
        ) {
            let ks = KeySpace::new(&prefix).expect("a valid prefix");
            let (a, p) = ids(&activity, &product);
            let k = ks.product(&a, &p);
            let named = [
                (&k.stock, SUFFIXES[0]),
                (&k.meta, SUFFIXES[1]),
                (&k.buyers, SUFFIXES[2]),
                (&k.ledger, SUFFIXES[3]),
                (&k.events, SUFFIXES[4]),
                (&k.books, SUFFIXES[5]),
                (&k.lock, LOCK_SUFFIX),
            ];
            let slot = key_slot(k.stock.as_bytes());
            let pattern = ks.activity_pattern(&a);
            for (key, suffix) in named {
                proptest::prop_assert_eq!(
                    ks.parse(key),
                    Some((activity.as_str(), product.as_str(), suffix))
                );
                proptest::prop_assert_eq!(key_slot(key.as_bytes()), slot, "{}", key);
                proptest::prop_assert!(key.starts_with(pattern.trim_end_matches('*')), "{}", key);
            }
        }

        /// Whatever a key looks like, a key that parses is exactly its parts put together, and
        /// the parts hold no separator.
        #[test]
        fn a_parsed_key_is_exactly_its_parts(
            key in "(seckill:\\{)?[a-z0-9:{}*-]{0,12}(\\}:)?\\PC{0,12}"
        ) {
            if let Some((a, p, suffix)) = KeySpace::default().parse(&key) {
                proptest::prop_assert_eq!(format!("seckill:{{{a}:{p}}}:{suffix}"), key.clone());
                proptest::prop_assert!(!a.contains([':', '}']) && !p.contains('}'), "{}", key);
            }
        }
    }

    #[test]
    fn bad_prefixes_are_refused() {
        for bad in ["", "a{b", "a*", "a b", "a}"] {
            assert!(KeySpace::new(bad).is_err(), "{bad:?}");
        }
    }
}
