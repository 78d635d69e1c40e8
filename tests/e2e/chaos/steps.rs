//! The steps of a chaos case, how a seed generates them, and their text form (what a failure
//! prints and `SECKILL_CHAOS_STEPS` reads back).
//!
//! Every step carries all of its own parameters, and a step that acts on "some" deduction or
//! order names it by a number taken modulo what exists when it runs. So a step list stays
//! meaningful when the shrinker removes steps from it: what remains still replays.

use seckill_console::ops::snapshot::Stage;
use std::fmt;

/// The products of every case: (id, stock, per-user limit). Six users at a limit of 2 can hold
/// 12 units: p1 (6) sells out, and a lost deduction resold makes it oversold; p2 (20) does not.
pub const PRODUCTS: [(&str, i64, i64); 2] = [("p1", 6, 2), ("p2", 20, 2)];
/// Users u0..u5.
pub const USERS: usize = 6;

/// One of the five keys the scripts take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Stock,
    Meta,
    Buyers,
    Ledger,
    Events,
}

const KEYS: [(Key, &str); 5] = [
    (Key::Stock, "stock"),
    (Key::Meta, "meta"),
    (Key::Buyers, "buyers"),
    (Key::Ledger, "ledger"),
    (Key::Events, "events"),
];

/// A value written over one the scripts read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// `HSET meta deducted abc`.
    Deducted,
    /// `HSET meta limit abc`.
    Limit,
    /// `HSET meta returned abc`.
    Returned,
    /// `HSET meta paused 7`.
    Paused,
    /// `SET stock abc`.
    Stock,
}

const FIELDS: [(Field, &str); 5] = [
    (Field::Deducted, "deducted"),
    (Field::Limit, "limit"),
    (Field::Returned, "returned"),
    (Field::Paused, "paused"),
    (Field::Stock, "stock"),
];

/// What a second console (or the buyers) does at a stage of the first console's write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Second {
    Fix,
    Topup {
        p: usize,
        change: i64,
    },
    Pause {
        p: usize,
        pause: bool,
    },
    PreheatForce,
    /// `n` buyer actions drawn from `seed`.
    Buyers {
        n: u32,
        seed: u32,
    },
}

/// Runs `action` the `nth` time (from 0) the first console reaches `stage`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    pub stage: Stage,
    pub nth: u32,
    pub action: Second,
}

/// One step of a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    // Buyers and the shop's app servers.
    /// A new request of `units` by user `user` on product `p`.
    Deduct {
        p: usize,
        user: usize,
        units: i64,
    },
    /// A request without an order (pending, or refused before) is sent again.
    Retry {
        pick: u32,
    },
    /// The order of a pending deduction commits, stamped `late_ms` before now (plus the
    /// database clock's lag).
    Land {
        pick: u32,
        late_ms: u32,
    },
    /// A pending deduction's order never comes (a crashed app server): an orphan.
    Abandon {
        pick: u32,
    },
    Pay {
        pick: u32,
    },
    /// A live order expires (or, paid, is cancelled); its stock is returned later, if at all.
    Expire {
        pick: u32,
    },
    /// The app server returns the stock of an ended order.
    GiveBack {
        pick: u32,
    },
    /// A caller that lost a reply records a compensation entry; `compensation resolve --all`.
    Compensate {
        pick: u32,
    },
    /// `compensation resolve --all` alone.
    Resolve,
    /// Time passes: every pending order lands or is abandoned first, then the grace window.
    Wait {
        pick: u32,
    },
    /// From now on the database's clock runs this far behind Redis's.
    Clock {
        behind_ms: u32,
    },
    // The console.
    /// `fix --yes`.
    Fix {
        hook: Option<Hook>,
    },
    /// `preheat`, or `preheat --force`.
    Preheat {
        force: bool,
        hook: Option<Hook>,
    },
    /// `topup --add change`.
    Topup {
        p: usize,
        change: i64,
        hook: Option<Hook>,
    },
    /// A top-up whose console dies after its first Redis step (and, with `db`, after the
    /// database write); `aged`: its lease has passed already.
    CrashTopup {
        p: usize,
        change: i64,
        db: bool,
        aged: bool,
    },
    /// `pause` / `resume --product`.
    Pause {
        p: usize,
        pause: bool,
    },
    /// The lease of a top-up left between its writes passes (its marker is backdated).
    LeasePass {
        p: usize,
    },
    // Faults.
    /// DEL (an eviction) of one key.
    Del {
        p: usize,
        key: Key,
    },
    /// XDEL of one event.
    Xdel {
        p: usize,
        pick: u32,
    },
    /// XTRIM MAXLEN `keep`.
    Xtrim {
        p: usize,
        keep: u32,
    },
    /// A corrupt value.
    Corrupt {
        p: usize,
        field: Field,
    },
    /// INCRBY of the stock outside the scripts.
    Incr {
        p: usize,
        by: i64,
    },
    /// The product's keys are saved (an RDB snapshot a replica or restart may go back to).
    Checkpoint {
        p: usize,
    },
    /// The saved keys come back (a restart from the older snapshot, a failover to a lagging
    /// replica).
    Rollback,
    /// Every key of the product is gone (a restart without persistence).
    Flush {
        p: usize,
    },
    /// A failover to a replica `lost` steps behind: every product's keys go back to how they
    /// were before the last `lost` steps, and the live view's connections drop.
    Failover {
        lost: u32,
    },
    // The live view (chaos/live.rs).
    /// The live view's connections are cut in the middle of its next refresh.
    Reconnect,
    /// The product's slot is left migrating (a cluster only), then set stable again.
    Migrate {
        p: usize,
    },
}

impl Step {
    /// True for the faults: the steps after which nothing is promised until a repair.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            Step::Del { .. }
                | Step::Xdel { .. }
                | Step::Xtrim { .. }
                | Step::Corrupt { .. }
                | Step::Incr { .. }
                | Step::Rollback
                | Step::Flush { .. }
                | Step::Failover { .. }
        )
    }

    /// True for the console's repairs (`fix --yes`, `preheat`, `preheat --force`).
    pub fn is_repair(&self) -> bool {
        matches!(self, Step::Fix { .. } | Step::Preheat { .. })
    }

    pub fn hook(&self) -> Option<&Hook> {
        match self {
            Step::Fix { hook } | Step::Preheat { hook, .. } | Step::Topup { hook, .. } => {
                hook.as_ref()
            }
            _ => None,
        }
    }

    /// The same step without its hook (the shrinker tries it).
    pub fn without_hook(&self) -> Step {
        match self {
            Step::Fix { .. } => Step::Fix { hook: None },
            Step::Preheat { force, .. } => Step::Preheat {
                force: *force,
                hook: None,
            },
            Step::Topup { p, change, .. } => Step::Topup {
                p: *p,
                change: *change,
                hook: None,
            },
            other => other.clone(),
        }
    }
}

/// A small deterministic generator (xorshift64): a seed is a whole case.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(n as u64)).unwrap_or(0)
    }

    pub fn pick(&mut self) -> u32 {
        u32::try_from(self.below(1 << 20)).unwrap_or(0)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn product(r: &mut Rng) -> usize {
    r.index(PRODUCTS.len())
}

fn change(r: &mut Rng) -> i64 {
    let n = 1 + r.below(5) as i64;
    if r.chance(50) { n } else { -n }
}

fn second(r: &mut Rng) -> Second {
    match r.below(10) {
        0 | 1 => Second::Fix,
        2 | 3 => Second::Topup {
            p: product(r),
            change: change(r),
        },
        4 | 5 => Second::Pause {
            p: product(r),
            pause: r.chance(60),
        },
        6 => Second::PreheatForce,
        _ => Second::Buyers {
            n: 1 + r.below(4) as u32,
            seed: r.pick(),
        },
    }
}

/// A hook at one of the stages the console reaches (`writes`: the stages of a top-up).
fn hook(r: &mut Rng, topup: bool) -> Option<Hook> {
    if !r.chance(50) {
        return None;
    }
    let stage = if topup {
        [Stage::BeforeWrite, Stage::TopupBegun, Stage::TopupWritten][r.index(3)]
    } else {
        [
            Stage::Cut,
            Stage::Snapshot,
            Stage::AfterCut,
            Stage::Round,
            Stage::BeforeWrite,
            Stage::BeforeWrite,
        ][r.index(6)]
    };
    Some(Hook {
        stage,
        nth: if r.chance(75) { 0 } else { 1 },
        action: second(r),
    })
}

/// The steps of the case `seed`: 30 to 50 of them, about half buyers, a quarter the console,
/// a fifth faults and a few that strike the live view.
pub fn generate(seed: u64) -> Vec<Step> {
    let mut r = Rng::new(seed);
    let n = 30 + r.index(21);
    let mut steps = Vec::with_capacity(n + 1);
    if r.chance(40) {
        // The database's clock behind Redis's for the whole case.
        steps.push(Step::Clock {
            behind_ms: u32::try_from(r.below(10_001)).unwrap_or(0),
        });
    }
    for _ in 0..n {
        let s = match r.below(106) {
            0..=21 => Step::Deduct {
                p: product(&mut r),
                user: r.index(USERS),
                units: 1 + r.below(2) as i64,
            },
            22..=35 => Step::Land {
                pick: r.pick(),
                late_ms: u32::try_from(r.below(1_000)).unwrap_or(0),
            },
            36..=38 => Step::Pay { pick: r.pick() },
            39..=43 => Step::Expire { pick: r.pick() },
            44..=46 => Step::GiveBack { pick: r.pick() },
            47..=49 => Step::Retry { pick: r.pick() },
            50 | 51 => Step::Abandon { pick: r.pick() },
            52 | 53 => Step::Compensate { pick: r.pick() },
            54..=61 => Step::Fix {
                hook: hook(&mut r, false),
            },
            62..=65 => Step::Preheat {
                force: r.chance(50),
                hook: hook(&mut r, false),
            },
            66..=70 => Step::Topup {
                p: product(&mut r),
                change: change(&mut r),
                hook: hook(&mut r, true),
            },
            71 | 72 => Step::CrashTopup {
                p: product(&mut r),
                change: change(&mut r),
                db: r.chance(50),
                aged: r.chance(50),
            },
            73..=76 => Step::Pause {
                p: product(&mut r),
                pause: r.chance(60),
            },
            77 => Step::LeasePass { p: product(&mut r) },
            78..=80 => Step::Wait { pick: r.pick() },
            81..=86 => Step::Del {
                p: product(&mut r),
                key: KEYS[r.index(KEYS.len())].0,
            },
            87 => Step::Xdel {
                p: product(&mut r),
                pick: r.pick(),
            },
            88 => Step::Xtrim {
                p: product(&mut r),
                keep: u32::try_from(r.below(4)).unwrap_or(0),
            },
            89 | 90 => Step::Corrupt {
                p: product(&mut r),
                field: FIELDS[r.index(FIELDS.len())].0,
            },
            91 => Step::Incr {
                p: product(&mut r),
                by: 1 + r.below(4) as i64,
            },
            92..=94 => Step::Checkpoint { p: product(&mut r) },
            95..=97 => Step::Rollback,
            98 | 99 => Step::Flush { p: product(&mut r) },
            100 | 101 => Step::Failover {
                lost: 1 + u32::try_from(r.below(3)).unwrap_or(0),
            },
            102 | 103 => Step::Reconnect,
            _ => Step::Migrate { p: product(&mut r) },
        };
        steps.push(s);
    }
    steps
}

// ---- the text form: steps joined by ',', fields by '.', a hook after '@' ----

fn p_name(p: usize) -> &'static str {
    PRODUCTS[p % PRODUCTS.len()].0
}

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Cut => "cut",
        Stage::Snapshot => "snapshot",
        Stage::AfterCut => "aftercut",
        Stage::Round => "round",
        Stage::BeforeWrite => "beforewrite",
        Stage::TopupBegun => "begun",
        Stage::TopupWritten => "written",
    }
}

impl fmt::Display for Second {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Second::Fix => write!(f, "fix"),
            Second::Topup { p, change } => write!(f, "topup.{}.{change:+}", p_name(*p)),
            Second::Pause { p, pause } => {
                write!(
                    f,
                    "{}.{}",
                    if *pause { "pause" } else { "resume" },
                    p_name(*p)
                )
            }
            Second::PreheatForce => write!(f, "preheat.force"),
            Second::Buyers { n, seed } => write!(f, "buyers.{n}.{seed}"),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Deduct { p, user, units } => write!(f, "deduct.{}.u{user}.{units}", p_name(*p)),
            Step::Retry { pick } => write!(f, "retry.{pick}"),
            Step::Land { pick, late_ms } => write!(f, "land.{pick}.{late_ms}"),
            Step::Abandon { pick } => write!(f, "abandon.{pick}"),
            Step::Pay { pick } => write!(f, "pay.{pick}"),
            Step::Expire { pick } => write!(f, "expire.{pick}"),
            Step::GiveBack { pick } => write!(f, "giveback.{pick}"),
            Step::Compensate { pick } => write!(f, "comp.{pick}"),
            Step::Resolve => write!(f, "resolve"),
            Step::Wait { pick } => write!(f, "wait.{pick}"),
            Step::Clock { behind_ms } => write!(f, "clock.{behind_ms}"),
            Step::Fix { .. } => write!(f, "fix"),
            Step::Preheat { force, .. } => {
                write!(f, "preheat{}", if *force { ".force" } else { "" })
            }
            Step::Topup { p, change, .. } => write!(f, "topup.{}.{change:+}", p_name(*p)),
            Step::CrashTopup {
                p,
                change,
                db,
                aged,
            } => write!(
                f,
                "crash.{}.{change:+}.{}.{}",
                p_name(*p),
                if *db { "db" } else { "nodb" },
                if *aged { "aged" } else { "young" }
            ),
            Step::Pause { p, pause } => {
                write!(
                    f,
                    "{}.{}",
                    if *pause { "pause" } else { "resume" },
                    p_name(*p)
                )
            }
            Step::LeasePass { p } => write!(f, "lease.{}", p_name(*p)),
            Step::Del { p, key } => {
                let name = KEYS.iter().find(|(k, _)| k == key).map_or("?", |(_, n)| n);
                write!(f, "del.{}.{name}", p_name(*p))
            }
            Step::Xdel { p, pick } => write!(f, "xdel.{}.{pick}", p_name(*p)),
            Step::Xtrim { p, keep } => write!(f, "xtrim.{}.{keep}", p_name(*p)),
            Step::Corrupt { p, field } => {
                let name = FIELDS
                    .iter()
                    .find(|(x, _)| x == field)
                    .map_or("?", |(_, n)| n);
                write!(f, "corrupt.{}.{name}", p_name(*p))
            }
            Step::Incr { p, by } => write!(f, "incr.{}.{by}", p_name(*p)),
            Step::Checkpoint { p } => write!(f, "checkpoint.{}", p_name(*p)),
            Step::Rollback => write!(f, "rollback"),
            Step::Flush { p } => write!(f, "flush.{}", p_name(*p)),
            Step::Failover { lost } => write!(f, "failover.{lost}"),
            Step::Reconnect => write!(f, "reconnect"),
            Step::Migrate { p } => write!(f, "migrate.{}", p_name(*p)),
        }?;
        if let Some(h) = self.hook() {
            write!(f, "@{}{}:{}", stage_name(h.stage), h.nth, h.action)?;
        }
        Ok(())
    }
}

/// The text form of a step list, as `SECKILL_CHAOS_STEPS` takes it.
pub fn show(steps: &[Step]) -> String {
    steps
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn num<T: std::str::FromStr>(s: Option<&&str>, what: &str) -> Result<T, String> {
    let s = s.ok_or_else(|| format!("{what} is missing"))?;
    s.trim_start_matches('+')
        .parse()
        .map_err(|_| format!("{what} '{s}' is not a number"))
}

fn prod(s: Option<&&str>) -> Result<usize, String> {
    let s = s.ok_or("the product is missing")?;
    PRODUCTS
        .iter()
        .position(|(id, _, _)| id == s)
        .ok_or_else(|| format!("unknown product '{s}'"))
}

fn parse_second(text: &str) -> Result<Second, String> {
    let f: Vec<&str> = text.split('.').collect();
    Ok(match f[0] {
        "fix" => Second::Fix,
        "topup" => Second::Topup {
            p: prod(f.get(1))?,
            change: num(f.get(2), "the change")?,
        },
        "pause" | "resume" => Second::Pause {
            p: prod(f.get(1))?,
            pause: f[0] == "pause",
        },
        "preheat" => Second::PreheatForce,
        "buyers" => Second::Buyers {
            n: num(f.get(1), "the count")?,
            seed: num(f.get(2), "the seed")?,
        },
        other => return Err(format!("unknown second action '{other}'")),
    })
}

fn parse_hook(text: &str) -> Result<Hook, String> {
    let (at, action) = text
        .split_once(':')
        .ok_or_else(|| format!("hook '{text}' has no ':'"))?;
    let digits = at.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let name = &at[..at.len() - digits.len()];
    let stage = [
        Stage::Cut,
        Stage::Snapshot,
        Stage::AfterCut,
        Stage::Round,
        Stage::BeforeWrite,
        Stage::TopupBegun,
        Stage::TopupWritten,
    ]
    .into_iter()
    .find(|s| stage_name(*s) == name)
    .ok_or_else(|| format!("unknown stage '{name}'"))?;
    Ok(Hook {
        stage,
        nth: digits.parse().unwrap_or(0),
        action: parse_second(action)?,
    })
}

fn parse_step(token: &str) -> Result<Step, String> {
    let (main, hook) = match token.split_once('@') {
        Some((m, h)) => (m, Some(parse_hook(h)?)),
        None => (token, None),
    };
    let f: Vec<&str> = main.split('.').collect();
    let pick = || num::<u32>(f.get(1), "the pick");
    let key = |s: Option<&&str>| {
        KEYS.iter()
            .find(|(_, n)| Some(n) == s)
            .map(|(k, _)| *k)
            .ok_or_else(|| format!("unknown key in '{main}'"))
    };
    let step = match f[0] {
        "deduct" => Step::Deduct {
            p: prod(f.get(1))?,
            user: num(
                f.get(2).map(|u| u.trim_start_matches('u')).as_ref(),
                "the user",
            )?,
            units: num(f.get(3), "the units")?,
        },
        "retry" => Step::Retry { pick: pick()? },
        "land" => Step::Land {
            pick: pick()?,
            late_ms: num(f.get(2), "the lateness")?,
        },
        "abandon" => Step::Abandon { pick: pick()? },
        "pay" => Step::Pay { pick: pick()? },
        "expire" => Step::Expire { pick: pick()? },
        "giveback" => Step::GiveBack { pick: pick()? },
        "comp" => Step::Compensate { pick: pick()? },
        "resolve" => Step::Resolve,
        "wait" => Step::Wait { pick: pick()? },
        "clock" => Step::Clock {
            behind_ms: num(f.get(1), "the lag")?,
        },
        "fix" => Step::Fix { hook },
        "preheat" => Step::Preheat {
            force: f.get(1) == Some(&"force"),
            hook,
        },
        "topup" => Step::Topup {
            p: prod(f.get(1))?,
            change: num(f.get(2), "the change")?,
            hook,
        },
        "crash" => Step::CrashTopup {
            p: prod(f.get(1))?,
            change: num(f.get(2), "the change")?,
            db: f.get(3) == Some(&"db"),
            aged: f.get(4) == Some(&"aged"),
        },
        "pause" | "resume" => Step::Pause {
            p: prod(f.get(1))?,
            pause: f[0] == "pause",
        },
        "lease" => Step::LeasePass { p: prod(f.get(1))? },
        "del" => Step::Del {
            p: prod(f.get(1))?,
            key: key(f.get(2))?,
        },
        "xdel" => Step::Xdel {
            p: prod(f.get(1))?,
            pick: num(f.get(2), "the pick")?,
        },
        "xtrim" => Step::Xtrim {
            p: prod(f.get(1))?,
            keep: num(f.get(2), "the length")?,
        },
        "corrupt" => Step::Corrupt {
            p: prod(f.get(1))?,
            field: FIELDS
                .iter()
                .find(|(_, n)| Some(n) == f.get(2))
                .map(|(x, _)| *x)
                .ok_or_else(|| format!("unknown field in '{main}'"))?,
        },
        "incr" => Step::Incr {
            p: prod(f.get(1))?,
            by: num(f.get(2), "the increment")?,
        },
        "checkpoint" => Step::Checkpoint { p: prod(f.get(1))? },
        "rollback" => Step::Rollback,
        "flush" => Step::Flush { p: prod(f.get(1))? },
        "failover" => Step::Failover {
            lost: num(f.get(1), "the steps lost")?,
        },
        "reconnect" => Step::Reconnect,
        "migrate" => Step::Migrate { p: prod(f.get(1))? },
        other => return Err(format!("unknown step '{other}'")),
    };
    Ok(step)
}

/// Reads a step list in the text form [`show`] prints.
pub fn parse(text: &str) -> Result<Vec<Step>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| parse_step(t).map_err(|e| format!("step '{t}': {e}")))
        .collect()
}

#[test]
fn chaos_step_lists_read_back_what_they_print() {
    for seed in 0..300 {
        let steps = generate(seed);
        let text = show(&steps);
        assert_eq!(parse(&text).as_ref(), Ok(&steps), "seed {seed}: {text}");
    }
}
