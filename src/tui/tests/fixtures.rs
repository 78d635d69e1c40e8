//! Fixed data for the TUI tests: an App built directly, no I/O, every time the same.

use crate::db::activity::ActivitySummary;
use crate::db::audit::AuditEntry;
use crate::db::compensation::Compensation;
use crate::domain::alerts::{self, AlertKind, QueueSummary};
use crate::domain::preheat::{Action as PreheatAction, TokenBucket};
use crate::domain::stock::{Meta, ProductStatus, State, StockValue, Truth};
use crate::domain::{Activity, ActivityId, Phase};
use crate::ops::health::NodeHealth;
use crate::ops::health::{NodeInfo, RedisInfo};
use crate::ops::preheat::{PreheatProduct, PreheatReport};
use crate::ops::status::{StatusReport, Totals};
use crate::redis::Role;
use crate::redis::info::{Memory, NodeStats, SlowEntry};
use crate::tui::action::Action;
use crate::tui::app::{App, AppConfig};
use crate::tui::feed::Fetched;
use crate::tui::feed::Overview;
use crate::tui::views;
use crate::worker::stats::Invariant;
use crate::worker::{LiveSnapshot, RunStats};
use chrono::{DateTime, Duration as Days, TimeZone, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The data's clock: every snapshot is taken around this moment.
pub fn t(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0)
        .single()
        .expect("valid time")
        + Days::seconds(secs)
}

/// The UI's clock: one fixed origin per test process, offsets in seconds.
pub fn at(secs: u64) -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now) + Duration::from_secs(secs)
}

pub fn id(s: &str) -> ActivityId {
    ActivityId::parse(s).expect("valid id")
}

pub fn config(read_only: bool) -> AppConfig {
    AppConfig {
        read_only,
        refresh: Duration::from_secs(1),
        redis_label: "redis://ops:***@10.0.0.5:6379".into(),
        db_label: "postgres://ops:***@db.internal:5432/shop".into(),
        key_prefix: "seckill".into(),
        // A fixed zone: the snapshots must not depend on the machine's.
        tz: crate::domain::zone::Zone::Named(chrono_tz::Tz::UTC),
        ascii: false,
    }
}

pub fn activity(
    name: &str,
    title: &str,
    start: i64,
    end: i64,
    status: &str,
    products: i64,
    stock: i64,
) -> ActivitySummary {
    ActivitySummary {
        activity: Activity {
            activity_id: id(name),
            name: title.into(),
            starts_at: t(start),
            ends_at: t(end),
            status: crate::domain::activity::ActivityStatus::parse(status)
                .expect("a status of the contract"),
        },
        products,
        total_stock: stock,
    }
}

/// Five activities, one in each state the list shows.
pub fn activities() -> Vec<ActivitySummary> {
    vec![
        activity(
            "autumn",
            "Autumn sale",
            86_400 * 90,
            86_400 * 91,
            "draft",
            3,
            300,
        ),
        activity(
            "summer",
            "Summer sale",
            86_400,
            86_400 + 7200,
            "scheduled",
            2,
            50,
        ),
        activity("flash-2", "Flash two", 3600, 7200, "scheduled", 4, 80),
        activity(
            "spring-sale",
            "Spring sale",
            -3600,
            3600,
            "scheduled",
            6,
            1160,
        ),
        activity(
            "winter",
            "Winter sale",
            -86_400 * 30,
            -86_400 * 29,
            "scheduled",
            2,
            20,
        ),
    ]
}

fn product(
    name: &str,
    initial: i64,
    stock: StockValue,
    sold: i64,
    in_flight: i64,
) -> ProductStatus {
    let meta = Meta {
        present: true,
        initial: Some(initial),
        limit: Some(2),
        ..Meta::default()
    };
    ProductStatus::build(
        name,
        2,
        (&stock, &meta, &[]),
        Truth::new(initial, sold, in_flight, 0),
    )
}

/// The products of spring-sale after `extra` more units were sold (for a second snapshot).
pub fn products(extra: i64) -> Vec<ProductStatus> {
    let mut orphaned = product("case", 500, StockValue::Value(440), 60, 0);
    orphaned.orphaned = 2;
    let mut all = vec![
        product("phone", 100, StockValue::Value(60 - extra), 40 + extra, 0),
        product("laptop", 20, StockValue::Value(23), 2, 0),
        product("tablet", 30, StockValue::Value(-2), 30, 0),
        product("watch", 10, StockValue::Missing, 0, 0),
        product("charger", 500, StockValue::Value(400), 98, 2),
        orphaned,
    ];
    // Names as shops import them: some in Chinese (two columns a character), one none.
    for (p, name) in all.iter_mut().zip([
        "手机 X",
        "Laptop Pro 14",
        "平板",
        "",
        "Charger 65W",
        "手机壳",
    ]) {
        p.name = name.to_string();
    }
    all
}

fn totals(products: &[ProductStatus]) -> Totals {
    let mut t = Totals::default();
    for p in products {
        t.initial += p.initial;
        t.redis_remaining += p.redis_remaining.unwrap_or(0);
        t.db_sold += p.db_sold;
        t.in_flight += p.in_flight;
        t.orphaned += p.orphaned;
        t.expected_remaining += p.expected_remaining;
        if p.state != State::Ok {
            t.not_ok += 1;
        }
    }
    t
}

/// A status report of spring-sale taken at `t(secs)`.
pub fn report(secs: i64, extra: i64) -> StatusReport {
    let products = products(extra);
    let compensation = QueueSummary {
        pending: 2,
        more: false,
        oldest_secs: Some(95),
    };
    let mut alerts = alerts::product_alerts(&products);
    alerts.extend(alerts::queue_alert(
        AlertKind::CompensationPending,
        "compensation entries",
        &compensation,
        30,
    ));
    alerts.sort_by_key(|a| std::cmp::Reverse(a.severity));
    StatusReport {
        activity: "spring-sale".into(),
        phase: Phase::Live,
        totals: totals(&products),
        products,
        alerts,
        compensation,
        outbox: QueueSummary::default(),
        taken_at: t(secs),
        clock_skew_ms: None,
        keys_age_secs: None,
        redis_nodes: Vec::new(),
        master: None,
    }
}

pub fn fetched<T>(secs: u64, taken: i64, data: T) -> Fetched<T> {
    Fetched {
        at: at(secs),
        taken_at: t(taken),
        result: Ok(data),
    }
}

pub fn compensation() -> Vec<Compensation> {
    let entry = |id: i64, rid: &str, product: &str, status: &str, age: i64| Compensation {
        id,
        request_id: rid.into(),
        activity_id: "spring-sale".into(),
        product_id: product.into(),
        user_id: format!("user-{id}"),
        quantity: 1,
        status: status.into(),
        reason: "timeout".into(),
        resolution: (status != "pending").then(|| "the ledger has no record".into()),
        created_at: t(-age),
        resolved_at: None,
    };
    vec![
        entry(1, "req-0001", "phone", "pending", 95),
        entry(2, "req-0002", "charger", "pending", 40),
        entry(3, "req-0003", "laptop", "not_applied", 700),
    ]
}

pub fn audit() -> Vec<AuditEntry> {
    let entry = |secs: i64,
                 action: &str,
                 product: Option<&str>,
                 b: Option<&str>,
                 a: Option<&str>,
                 why: &str| AuditEntry {
        at: t(secs),
        actor: "alice".into(),
        action: action.into(),
        activity_id: "spring-sale".into(),
        product_id: product.map(Into::into),
        before_value: b.map(Into::into),
        after_value: a.map(Into::into),
        reason: why.into(),
        detail: String::new(),
    };
    vec![
        entry(
            -60,
            "fix",
            Some("phone"),
            Some("57"),
            Some("60"),
            "drift -3",
        ),
        entry(
            -600,
            "compensation.resolve",
            Some("laptop"),
            Some("pending"),
            Some("not_applied"),
            "no record",
        ),
        entry(
            -7200,
            "preheat",
            None,
            None,
            Some("1160"),
            "preheat decision go",
        ),
    ]
}

pub fn redis_info() -> RedisInfo {
    let scripts = |deduct: bool| {
        vec![
            ("deduct".to_string(), deduct),
            ("restore".to_string(), true),
            ("set_stock".to_string(), true),
        ]
    };
    let node = |addr: &str, role: Role, ok: bool, deduct: bool| NodeInfo {
        health: NodeHealth {
            addr: addr.into(),
            role,
            replica_of: None,
            ok,
            latency_ms: ok.then_some(0.42),
            scripts: if ok { scripts(deduct) } else { Vec::new() },
            error: (!ok).then(|| "timed out".into()),
            memory: Memory::default(),
            unchecked: Vec::new(),
            replication: None,
            migrating: Vec::new(),
            answered: ok,
            stats: NodeStats::default(),
        },
        stats: NodeStats {
            ops_per_sec: ok.then_some(1250.0),
            used_memory: ok.then(|| "2.31M".into()),
            max_memory: ok.then(|| "none".into()),
            version: ok.then(|| "7.2.4".into()),
            memory: Memory {
                used_bytes: ok.then_some(2_422_210),
                max_bytes: ok.then_some(0),
                policy: ok.then(|| "noeviction".into()),
                evicted_keys: ok.then_some(0),
            },
            server: None,
            ..NodeStats::default()
        },
        slowlog: if addr.ends_with("7000") {
            vec![SlowEntry {
                id: 4,
                at_unix: t(-30).timestamp(),
                micros: 12_500,
                command: "EVALSHA 2f1c0a".into(),
            }]
        } else {
            Vec::new()
        },
    };
    RedisInfo {
        nodes: vec![
            node("10.0.0.5:7000", Role::Primary, true, true),
            node("10.0.0.6:7001", Role::Primary, true, false),
            node("10.0.0.7:7002", Role::Replica, false, false),
        ],
    }
}

pub fn preheat_report(go: bool) -> PreheatReport {
    let p = |name: &str, stock: i64, action, written: bool, verified: bool| PreheatProduct {
        product: name.into(),
        action,
        stock,
        per_user_limit: 2,
        previous: (!written).then(|| stock.to_string()),
        written,
        verified,
        token_bucket: TokenBucket::new(stock, 7200),
        rebuilt: None,
        topup: None,
        error: None,
    };
    PreheatReport {
        activity: "spring-sale".into(),
        decision: if go { "go" } else { "no-go" },
        products: vec![
            p("phone", 60, PreheatAction::Write, true, true),
            p("laptop", 18, PreheatAction::Unchanged, false, true),
            p("tablet", 0, PreheatAction::Conflict, false, false),
        ],
        total_stock: 78,
        accepted: Vec::new(),
        reasons: if go {
            Vec::new()
        } else {
            vec![
                "1 product(s) hold other values in Redis than the database truth; nothing was written".into(),
            ]
        },
        conflicts: Vec::new(),
        warnings: Vec::new(),
        written: usize::from(go),
        unchanged: 1,
        elapsed_ms: 12,
        failure: (!go).then_some(crate::error::ErrorKind::Refused),
    }
}

/// The invariants of a dry run that held, and one that did not when `failed` names it.
fn invariants(lua: bool, failed: Option<(&str, &str)>) -> Vec<Invariant> {
    let books = if lua {
        "ledger = orders = sold"
    } else {
        "orders = initial - remaining"
    };
    let names = [
        (
            "sold = min(stock, what demand and limits allow)",
            "every product sold exactly what was allowed",
        ),
        ("no user above its limit", "every user within the limit"),
        ("nothing oversold", "0 units sold beyond the stock"),
        (
            "stock never negative",
            "final stock >= 0; negative seen in 0 samples while running",
        ),
        (books, "the books balance"),
    ];
    names
        .into_iter()
        .map(|(name, detail)| match failed {
            Some((f, why)) if f == name => Invariant {
                name: name.into(),
                ok: false,
                detail: why.into(),
            },
            _ => Invariant {
                name: name.into(),
                ok: true,
                detail: detail.into(),
            },
        })
        .collect()
}

/// The figures of one strategy of a dry run of spring-sale (1,160 units, 1,000 buyers).
#[allow(clippy::too_many_arguments)]
pub fn run_stats(
    strategy: &str,
    ops: f64,
    p50: f64,
    p99: f64,
    trips: f64,
    negative_seen: u64,
    lock_failures: u64,
    failed: Option<(&str, &str)>,
) -> RunStats {
    let invariants = invariants(strategy == "lua", failed);
    RunStats {
        strategy: strategy.into(),
        requests: 1100,
        succeeded: 1000 - lock_failures,
        sold_out: 0,
        user_limited: 100,
        paused: 0,
        errors: lock_failures,
        unknown: 0,
        ops_per_sec: ops,
        p50_ms: p50,
        p99_ms: p99,
        p999_ms: p99 * 2.0,
        oversold: 0,
        negative_seen,
        round_trips_per_request: trips,
        lock_failures,
        sold: 1000 - lock_failures as i64,
        stock: 1160,
        elapsed_ms: (1100.0 / ops * 1000.0) as u64,
        paid: 0,
        expired: 0,
        compensation_entries: 0,
        retries: 0,
        restore_failures: 0,
        error_reasons: Vec::new(),
        over_limit: 0,
        ok: invariants.iter().all(|i| i.ok),
        paused_products: Vec::new(),
        invariants,
    }
}

/// The four strategies side by side: the rollback strategy left a negative stock behind.
pub fn all_four() -> Vec<RunStats> {
    vec![
        run_stats("lua", 9120.0, 0.41, 1.9, 1.0, 0, 0, None),
        run_stats(
            "hincrby",
            11_400.0,
            0.35,
            1.6,
            1.3,
            37,
            0,
            Some((
                "stock never negative",
                "negative stock left behind: phone at -1",
            )),
        ),
        run_stats("lock", 2150.0, 3.8, 24.5, 4.6, 0, 12, None),
        run_stats("sql", 1320.0, 6.2, 31.0, 1.0, 0, 0, None),
    ]
}

/// Live figures of a running strategy.
pub fn live(done: u64, ops: f64) -> LiveSnapshot {
    LiveSnapshot {
        done,
        total: 1100,
        succeeded: done * 9 / 10,
        sold_out: 0,
        user_limited: done / 10,
        errors: 0,
        unknown: 0,
        ops_per_sec: ops,
        p50_ms: 0.42,
        p99_ms: 2.35,
        finished: false,
    }
}

/// An App on spring-sale with two status snapshots (so rates exist), the activities list,
/// the compensation queue, the audit and Redis; the UI clock at `at(3)`.
pub fn app(read_only: bool) -> App {
    let mut app = App::new(config(read_only), Some(id("spring-sale")), at(0));
    app.update(Action::Resize(100, 30));
    app.update(Action::Activities(fetched(0, 0, activities())));
    app.update(Action::Overview(fetched(
        0,
        0,
        vec![
            Overview {
                activity: "flash-2".into(),
                alerts: 0,
                preheated: true,
            },
            Overview {
                activity: "summer".into(),
                alerts: 2,
                preheated: false,
            },
        ],
    )));
    app.update(Action::Status(
        id("spring-sale"),
        fetched(0, 0, report(0, 0)),
    ));
    app.update(Action::Status(
        id("spring-sale"),
        fetched(2, 2, report(2, 6)),
    ));
    app.update(Action::Compensation(
        id("spring-sale"),
        fetched(2, 2, compensation()),
    ));
    app.update(Action::Audit(fetched(2, 2, audit())));
    app.update(Action::Redis(fetched(2, 2, redis_info())));
    app.update(Action::Tick(at(3)));
    app
}

/// The screen as text, one line per row, trailing spaces trimmed.
pub fn screen(app: &App, width: u16, height: u16) -> String {
    buffer_text(&draw(app, width, height))
}

/// The screen's buffer (for style assertions).
pub fn draw(app: &App, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    terminal
        .draw(|f| views::render(f, app))
        .expect("draw to the test backend");
    terminal.backend().buffer().clone()
}

pub fn buffer_text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        for x in area.left()..area.right() {
            if let Some(cell) = buf.cell((x, y)) {
                line.push_str(cell.symbol());
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Confirms the open dialog as an operator does: a moment after it opened (keys typed ahead
/// are ignored), Enter. The dialog is dated back rather than the clock moved on, so the figures
/// that count time stay as they were.
/// The open dialog as read a moment after it opened (keys within [`CONFIRM_AFTER`] of it are
/// taken as typed before it could be read).
///
/// [`CONFIRM_AFTER`]: crate::tui::app::CONFIRM_AFTER
pub fn read_a_moment(app: &mut App) {
    if let Some(opened) = app.now.checked_sub(crate::tui::app::CONFIRM_AFTER) {
        app.dialog_at = opened;
    }
}

pub fn confirm(app: &mut App) -> Vec<crate::tui::action::Command> {
    if let Some(opened) = app.now.checked_sub(crate::tui::app::CONFIRM_AFTER) {
        app.dialog_at = opened;
    }
    app.update(Action::Key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Enter,
        crossterm::event::KeyModifiers::NONE,
    )))
}
