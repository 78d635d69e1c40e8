//! The embedded worker: simulated buyers running the very same `lua/deduct.lua` the app servers
//! run (and, for comparison, the usual alternatives: decrement with a client-side rollback, a
//! lock, a conditional SQL UPDATE), with fault injection, latency histograms and
//! invariant checks.

pub mod batch;
pub mod demand;
pub mod dry_run;
pub mod orders;
pub mod payment;
pub mod run;
pub mod stats;
pub mod strategy;

use serde::Serialize;
use std::time::Duration;

pub use run::{LiveStats, LoadSpec, run_load};
pub use stats::{Live, LiveSnapshot, RunStats};

/// How buyers take stock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// `deduct.lua`: check and deduct in one atomic script, one round trip.
    Lua,
    /// DECRBY, then a client-side rollback (INCRBY) when the result is negative.
    Hincrby,
    /// SET NX PX lock per product, read, check, decrement, release with compare-and-delete.
    Lock,
    /// A conditional `UPDATE ... SET stock = stock - q WHERE ... AND stock >= q` in the database.
    Sql,
}

impl Strategy {
    pub const ALL: [Strategy; 4] = [
        Strategy::Lua,
        Strategy::Hincrby,
        Strategy::Lock,
        Strategy::Sql,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Lua => "lua",
            Strategy::Hincrby => "hincrby",
            Strategy::Lock => "lock",
            Strategy::Sql => "sql",
        }
    }
}

/// Injected faults, each a probability per request (0.0 to 1.0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Faults {
    /// The hincrby client "dies" between its decrement and its rollback: stock stays negative.
    pub crash_between: f64,
    /// The request or its reply is lost: the outcome is unknown and a compensation entry is
    /// written.
    pub timeout: f64,
    /// SCRIPT FLUSH on every node while the run goes on.
    pub script_flush: bool,
}

impl Faults {
    /// Parses `crash-between=P,timeout=P,script-flush` (any subset, comma-separated).
    pub fn parse(text: &str) -> crate::Result<Self> {
        let mut f = Faults::default();
        let mut seen = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = match part.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (part, None),
            };
            // `timeout=0.1,timeout=0.2` would silently keep one of them.
            if seen.contains(&name) {
                return Err(crate::Error::bad_input(format!(
                    "fault '{name}' is given twice in '{text}': give each fault once"
                )));
            }
            seen.push(name);
            let prob = |v: Option<&str>| -> crate::Result<f64> {
                let v = v.ok_or_else(|| {
                    crate::Error::bad_input(format!(
                        "fault '{name}' needs a probability, e.g. {name}=0.05"
                    ))
                })?;
                match v.parse::<f64>() {
                    Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
                    _ => Err(crate::Error::bad_input(format!(
                        "fault '{name}': '{v}' is not a probability between 0 and 1"
                    ))),
                }
            };
            match name {
                "crash-between" => f.crash_between = prob(value)?,
                "timeout" => f.timeout = prob(value)?,
                "script-flush" if value.is_none() => f.script_flush = true,
                _ => {
                    return Err(crate::Error::bad_input(format!(
                        "unknown fault '{part}': use crash-between=P, timeout=P or script-flush"
                    )));
                }
            }
        }
        Ok(f)
    }
}

/// How often the script-flush fault flushes while a run goes on.
pub const SCRIPT_FLUSH_EVERY: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Any text either parses into probabilities between 0 and 1, or is bad input.
        #[test]
        fn accepted_faults_are_probabilities(
            s in concat!(
                "\\PC{0,40}|((crash-between|timeout|script-flush|meteor)",
                "(=(-?[0-9](\\.[0-9]{1,2})?|[0-9]e-?[0-9]|inf|NaN|))?, ?){0,4}"
            )
        ) {
            match Faults::parse(&s) {
                Ok(f) => {
                    let p = 0.0..=1.0;
                    proptest::prop_assert!(p.contains(&f.crash_between), "{:?}: {:?}", s, f);
                    proptest::prop_assert!(p.contains(&f.timeout), "{:?}: {:?}", s, f);
                }
                Err(e) => proptest::prop_assert_eq!(e.kind, crate::error::ErrorKind::BadInput),
            }
        }

        /// Faults written out parse back to the same faults, in either order, with spaces.
        #[test]
        fn faults_round_trip(
            crash in 0.0f64..=1.0,
            timeout in 0.0f64..=1.0,
            flush in proptest::bool::ANY,
            reverse in proptest::bool::ANY,
        ) {
            let mut parts = vec![
                format!("crash-between={crash}"),
                format!(" timeout = {timeout} "),
            ];
            if flush {
                parts.push("script-flush".into());
            }
            if reverse {
                parts.reverse();
            }
            let text = parts.join(",");
            let f = Faults::parse(&text).map_err(|e| e.message);
            proptest::prop_assert_eq!(
                f,
                Ok(Faults { crash_between: crash, timeout, script_flush: flush }),
                "{}",
                text
            );
        }

        /// A probability outside 0 to 1 is refused, and the message names the value.
        #[test]
        fn a_probability_out_of_range_is_named(
            p in proptest::prop_oneof![1.000_001f64..1e9, -1e9f64..-0.000_001],
            name in "crash-between|timeout",
        ) {
            let e = Faults::parse(&format!("{name}={p}")).expect_err("out of range");
            proptest::prop_assert_eq!(e.kind, crate::error::ErrorKind::BadInput);
            proptest::prop_assert!(
                e.message.contains(&format!("'{p}'")) && e.message.contains(&name),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn parses_faults() {
        let f = Faults::parse("crash-between=0.1, timeout=0.05,script-flush").expect("valid");
        assert_eq!(
            (f.crash_between, f.timeout, f.script_flush),
            (0.1, 0.05, true)
        );
        assert!(Faults::parse("timeout=2").is_err());
        assert!(Faults::parse("timeout").is_err());
        assert!(Faults::parse("meteor=0.1").is_err());
        assert_eq!(Faults::parse("").expect("empty"), Faults::default());
    }
}
