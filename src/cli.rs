//! The command line: global flags and subcommands (clap derive). Flags are the top layer of the
//! configuration; see `config`.

use clap::builder::BoolishValueParser;
use clap::{Args, Parser, Subcommand};
use seckill_console::config::{Layer, StringOrList};
use std::path::PathBuf;

/// The ops console for flash-sale stock: Redis is the gate, the database is the truth.
#[derive(Debug, Parser)]
#[command(name = "seckill-console", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalFlags,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags every command takes. Each is also an environment variable (clap reads it; the help
/// names it but never shows its value, since URLs carry passwords) and a config-file key: the
/// flag wins over the variable, which wins over the file.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Global options")]
pub struct GlobalFlags {
    /// Redis URL: redis://host:port (user:password@ before the host for ACL) or rediss://...
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "SECKILL_REDIS_URL",
        hide_env_values = true
    )]
    pub redis: Option<String>,

    /// Seed nodes of a Redis Cluster, comma-separated
    #[arg(
        long,
        global = true,
        value_name = "URL,URL,...",
        env = "SECKILL_REDIS_CLUSTER",
        hide_env_values = true
    )]
    pub redis_cluster: Option<String>,

    /// Sentinels, comma-separated host:port (or URLs with their own credentials, rediss:// for
    /// TLS); the primary is the one they name for --sentinel-master, followed through failovers
    #[arg(
        long,
        global = true,
        value_name = "HOST:PORT,...",
        env = "SECKILL_REDIS_SENTINEL",
        hide_env_values = true
    )]
    pub redis_sentinel: Option<String>,

    /// The master's name in the Sentinels' configuration (with --redis-sentinel)
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        env = "SECKILL_SENTINEL_MASTER",
        hide_env_values = true
    )]
    pub sentinel_master: Option<String>,

    /// Database URL: sqlite:PATH, postgres://..., mysql://...
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "SECKILL_DATABASE_URL",
        hide_env_values = true
    )]
    pub db: Option<String>,

    /// Config file (TOML)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "SECKILL_CONFIG",
        hide_env_values = true
    )]
    pub config: Option<PathBuf>,

    /// Refuse every write, before anything is sent (the variable takes 1/0, true/false, yes/no, on/off)
    #[arg(long, global = true, env = "SECKILL_READ_ONLY", hide_env_values = true, value_parser = BoolishValueParser::new())]
    pub read_only: bool,

    /// Print one JSON document on stdout; errors as JSON on stderr
    #[arg(long, global = true, env = "SECKILL_JSON", hide_env_values = true, value_parser = BoolishValueParser::new())]
    pub json: bool,

    /// Name recorded in the audit table (default: the OS user)
    #[arg(
        long,
        global = true,
        value_name = "NAME",
        env = "SECKILL_ACTOR",
        hide_env_values = true
    )]
    pub actor: Option<String>,

    /// Key prefix of the live activity keys (default: seckill)
    #[arg(
        long,
        global = true,
        value_name = "PREFIX",
        env = "SECKILL_PREFIX",
        hide_env_values = true
    )]
    pub prefix: Option<String>,

    /// Connect timeout for Redis and the database, in ms (default 2000)
    #[arg(
        long,
        global = true,
        value_name = "MS",
        env = "SECKILL_CONNECT_TIMEOUT_MS",
        hide_env_values = true,
        value_parser = trimmed::<u64>
    )]
    pub connect_timeout_ms: Option<u64>,

    /// Redis response timeout, in ms (default 1000)
    #[arg(
        long,
        global = true,
        value_name = "MS",
        env = "SECKILL_RESPONSE_TIMEOUT_MS",
        hide_env_values = true,
        value_parser = trimmed::<u64>
    )]
    pub response_timeout_ms: Option<u64>,

    /// Grace window: an unordered deduction younger than this is in flight, older is orphaned (default 60)
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        env = "SECKILL_GRACE_SECS",
        hide_env_values = true,
        value_parser = trimmed::<u64>
    )]
    pub grace_secs: Option<u64>,

    /// PEM file of the CA that signs the Redis servers' certificates (for rediss://)
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "SECKILL_REDIS_CA",
        hide_env_values = true
    )]
    pub redis_ca: Option<PathBuf>,

    /// TUI refresh interval in seconds, 0.1 to 3600 (default 1)
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        env = "SECKILL_REFRESH_SECS",
        hide_env_values = true,
        value_parser = trimmed::<f64>
    )]
    pub refresh: Option<f64>,

    /// Show times in this zone: an IANA name or local (default)
    #[arg(
        long,
        global = true,
        value_name = "ZONE",
        env = "SECKILL_TZ",
        hide_env_values = true
    )]
    pub tz: Option<String>,

    /// Alert on a compensation entry pending longer than this (default 30)
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        env = "SECKILL_COMPENSATION_ALERT_SECS",
        hide_env_values = true,
        value_parser = trimmed::<u64>
    )]
    pub compensation_alert_secs: Option<u64>,

    /// Alert on an outbox row unsent longer than this (default 60)
    #[arg(
        long,
        global = true,
        value_name = "SECS",
        env = "SECKILL_OUTBOX_ALERT_SECS",
        hide_env_values = true,
        value_parser = trimmed::<u64>
    )]
    pub outbox_alert_secs: Option<u64>,

    /// Days after the activity ends that its keys expire; 0: never (default 7, at most 3650)
    #[arg(
        long,
        global = true,
        value_name = "DAYS",
        env = "SECKILL_KEY_TTL_DAYS",
        hide_env_values = true,
        value_parser = trimmed::<u64>
    )]
    pub key_ttl_days: Option<u64>,

    /// Share of Redis's time, in percent, a live reader's first read may take (TUI, watch,
    /// exporter; 1 to 100, default 15): the rest is the sale's
    #[arg(
        long,
        global = true,
        value_name = "PCT",
        env = "SECKILL_WARM_SHARE_PCT",
        hide_env_values = true,
        value_parser = trimmed::<u64>
    )]
    pub warm_share_pct: Option<u64>,
}

impl GlobalFlags {
    /// The flags and their variables as the top configuration layer. A switch that is off is
    /// "not set" here, so a config file can still turn it on.
    pub fn layer(&self) -> Layer {
        Layer {
            redis: self.redis.clone(),
            redis_cluster: self.redis_cluster.clone().map(StringOrList::One),
            redis_sentinel: self.redis_sentinel.clone().map(StringOrList::One),
            sentinel_master: self.sentinel_master.clone(),
            db: self.db.clone(),
            read_only: self.read_only.then_some(true),
            json: self.json.then_some(true),
            actor: self.actor.clone(),
            prefix: self.prefix.clone(),
            connect_timeout_ms: self.connect_timeout_ms,
            response_timeout_ms: self.response_timeout_ms,
            grace_secs: self.grace_secs,
            redis_ca: self.redis_ca.clone(),
            refresh_secs: self.refresh,
            tz: self.tz.clone(),
            compensation_alert_secs: self.compensation_alert_secs,
            outbox_alert_secs: self.outbox_alert_secs,
            key_ttl_days: self.key_ttl_days,
            warm_share_pct: self.warm_share_pct,
        }
    }
}

/// A number with the spaces around it ignored (`SECKILL_GRACE_SECS=" 30"` from a YAML file).
fn trimmed<T>(raw: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    raw.trim().parse().map_err(|e: T::Err| e.to_string())
}

/// Parses the command line with its SECKILL_* variables as the README's precedence says:
/// - an empty variable is unset (compose files write `VAR: ${X:-}`), not an empty value;
/// - a Redis target typed on the command line wins over the other kind of target from the
///   environment (`--redis-cluster` with `SECKILL_REDIS_URL` set), as flags win over variables.
///
/// Both kinds at the same level (two flags, or two variables) stay an error, named by
/// `config::resolve`.
pub fn parse(
    args: &[String],
    env: &std::collections::HashMap<String, String>,
) -> Result<Cli, clap::Error> {
    use clap::parser::ValueSource;
    use clap::{CommandFactory, FromArgMatches};
    let mut cmd = Cli::command();
    let unset: Vec<clap::Id> = cmd
        .get_arguments()
        .filter(|a| {
            a.get_env()
                .and_then(|name| name.to_str())
                .and_then(|name| env.get(name))
                .is_some_and(|v| v.trim().is_empty())
        })
        .map(|a| a.get_id().clone())
        .collect();
    for id in unset {
        cmd = cmd.mut_arg(id, |a| a.env(None));
    }
    let matches = cmd.try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    match (
        matches.value_source("redis"),
        matches.value_source("redis_cluster"),
    ) {
        (Some(ValueSource::CommandLine), Some(ValueSource::EnvVariable)) => {
            cli.global.redis_cluster = None;
        }
        (Some(ValueSource::EnvVariable), Some(ValueSource::CommandLine)) => {
            cli.global.redis = None;
        }
        _ => {}
    }
    Ok(cli)
}

/// True when JSON output was asked for, read from the raw arguments and environment: for the
/// one case where clap itself failed to parse them (a usage error must still come out as JSON).
pub fn json_requested_raw(
    args: &[String],
    env: &std::collections::HashMap<String, String>,
) -> bool {
    let boolish = |v: &str| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "1" | "true" | "t" | "yes" | "y" | "on"
        )
    };
    args.iter().any(|a| a == "--json") || env.get("SECKILL_JSON").is_some_and(|v| boolish(v))
}

/// The environment variable behind a flag, when that variable is set to `value`: a bad value
/// that came from the environment is then named by its variable, not by a flag nobody typed.
pub fn env_source(long: &str, value: &str) -> Option<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let arg = cmd.get_arguments().find(|a| a.get_long() == Some(long))?;
    let name = arg.get_env()?.to_str()?.to_string();
    (std::env::var(&name).ok()? == value).then_some(name)
}

/// The message for a value starting with `-` given to an option (`--interval -1`): clap reads
/// it as an unknown flag and suggests `-- -1`, which passes nothing to the option. A number
/// option is told a negative value is not allowed; a text option (`--product -1`, a valid id)
/// how to give one (`--product=-1`). None for any other error, or when the word clap names
/// follows no option that takes a value and refuses negative numbers.
pub fn negative_value(args: &[String], e: &clap::Error) -> Option<String> {
    use clap::CommandFactory;
    use clap::error::{ContextKind, ContextValue};
    if e.kind() != clap::error::ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(fragment)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let cmd = Cli::command();
    // clap names `-2` of `-2h`, as if it were short flags: the whole word is what was typed,
    // and it is the first such word after an option that would refuse it.
    let (option, arg) = args.windows(2).find_map(|w| {
        let long = w[0].strip_prefix("--")?;
        let a = find_arg(&cmd, long)?;
        let refuses = a.get_action().takes_values()
            && !a.is_allow_negative_numbers_set()
            && !a.is_allow_hyphen_values_set();
        (refuses && w[1].starts_with(fragment.as_str())).then_some((a, &w[1]))
    })?;
    let long = option.get_long()?;
    // A duration (`--since`) is text to clap, but no duration is negative.
    let duration = option
        .get_value_names()
        .is_some_and(|n| n.iter().any(|n| n.as_str().contains("DURATION")));
    let text = !duration
        && option.get_value_parser().type_id() == clap::builder::ValueParser::string().type_id();
    Some(if text {
        format!(
            "error: --{long} {arg}: a value that starts with '-' is read as an option; write --{long}={arg}\n"
        )
    } else {
        format!(
            "error: --{long} {arg}: a negative value is not allowed here; give a positive number\n"
        )
    })
}

/// The option `--long` of `cmd` or of any of its subcommands.
fn find_arg<'c>(cmd: &'c clap::Command, long: &str) -> Option<&'c clap::Arg> {
    cmd.get_arguments()
        .find(|a| a.get_long() == Some(long))
        .or_else(|| cmd.get_subcommands().find_map(|c| find_arg(c, long)))
}

/// Variables the console reads, or sets for a command it runs (`watch --exec`), besides its
/// flags' own.
const OTHER_VARIABLES: [&str; 7] = [
    "SECKILL_LOG",
    "SECKILL_NICE",
    "SECKILL_ASCII",
    "SECKILL_ACTIVITY",
    "SECKILL_ALERT_KIND",
    "SECKILL_ALERT_SEVERITY",
    "SECKILL_ALERT_PRODUCT",
];

/// Every `SECKILL_*` variable the console knows: its flags' and [`OTHER_VARIABLES`].
fn known_variables() -> Vec<String> {
    use clap::CommandFactory;
    Cli::command()
        .get_arguments()
        .filter_map(|a| Some(a.get_env()?.to_str()?.to_string()))
        .chain(OTHER_VARIABLES.iter().map(|v| v.to_string()))
        .collect()
}

/// A warning for each `SECKILL_*` variable that is set, is not one of the console's, and reads
/// as a slip for one that is: a prefix of it or longer by a suffix, two letters off (one for a
/// short name), or the short `SECKILL_DB`. `SECKILL_REDIS` in place of `SECKILL_REDIS_URL`
/// leaves the console on its default Redis, where a preheat would then write. Other programs'
/// variables of the prefix (a test harness's knobs) are far from every name and pass unremarked.
pub fn misspelt_variables(env: &std::collections::HashMap<String, String>) -> Vec<String> {
    let known = known_variables();
    let mut set: Vec<&String> = env
        .keys()
        .filter(|n| n.starts_with("SECKILL_") && !known.contains(n))
        .collect();
    set.sort();
    set.into_iter()
        .filter_map(|name| {
            let meant: Vec<&str> = known
                .iter()
                .map(String::as_str)
                .filter(|k| {
                    k.starts_with(name.as_str())
                        || name.starts_with(k)
                        || edit_distance(k, name) <= slack(k, name)
                        || (*k == "SECKILL_DATABASE_URL"
                            && (name == "SECKILL_DB" || name.starts_with("SECKILL_DB_")))
                })
                .collect();
            (!meant.is_empty()).then(|| {
                format!(
                    "{name} is set but is not a setting of seckill-console, and is ignored: did you mean {}?",
                    meant.join(" or ")
                )
            })
        })
        .collect()
}

/// Letters two names may differ by and still read as one: two, or one where either is short
/// after its prefix (`SECKILL_DB` is not a slip for `SECKILL_TZ`).
fn slack(a: &str, b: &str) -> usize {
    let short = a.len().min(b.len()) < "SECKILL_".len() + 6;
    if short { 1 } else { 2 }
}

/// Levenshtein distance of two names, by bytes (the names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// A usage error's text with its `Usage:` line cut to what the operator must still give: clap
/// lists every option it saw there, so a Redis URL from `SECKILL_REDIS_URL` read as if it were
/// missing. Global options (all optional) leave that line; the rest of the text stays.
pub fn trim_usage(text: &str) -> String {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let globals: Vec<(String, bool)> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .filter_map(|a| {
            let takes_value = a.get_action().takes_values();
            Some((format!("--{}", a.get_long()?), takes_value))
        })
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let Some(rest) = line.strip_prefix("Usage: ") else {
            out.push_str(line);
            continue;
        };
        let end = if rest.ends_with('\n') { "\n" } else { "" };
        let mut kept: Vec<&str> = Vec::new();
        let mut words = rest.trim_end_matches('\n').split(' ').peekable();
        while let Some(w) = words.next() {
            match globals.iter().find(|(long, _)| long == w) {
                Some((_, true)) => {
                    if words.peek().is_some_and(|v| v.starts_with('<')) {
                        words.next();
                    }
                }
                Some((_, false)) => {}
                None => kept.push(w),
            }
        }
        out.push_str("Usage: ");
        out.push_str(&kept.join(" "));
        out.push_str(end);
    }
    out
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole console on an embedded default: a private redis-server, a SQLite file, a demo
    /// activity and buyers in the background; opens the TUI and cleans up on exit
    Demo(DemoArgs),
    /// Apply the migrations of the configured database
    Migrate,
    /// Check that Redis (every node, scripts loaded) and the database (schema) answer
    Ping,
    /// Activities and products: import from a TOML file, list, show
    #[command(subcommand)]
    Activity(ActivityCommand),
    /// The preheat gate: write the activity's keys from database truth, verify, go / no-go
    Preheat {
        /// Activity id
        activity: String,
        /// Overwrite keys that hold other values than the database truth
        #[arg(long)]
        force: bool,
        /// Go on a Redis whose maxmemory-policy may evict the activity's keys (any allkeys-*
        /// or volatile-*): the report names the risk accepted
        #[arg(long)]
        accept_eviction: bool,
    },
    /// Live stock and alerts per product
    Status {
        /// Activity id
        activity: String,
    },
    /// The drift report: Redis against database truth, per product
    Reconcile {
        /// Activity id
        activity: String,
        /// Exit 4 when any product is not ok
        #[arg(long)]
        fail_on_drift: bool,
    },
    /// Check a sale against the app servers' contract (docs/app-servers.md): every rule
    /// Redis and the database can show, each one broken named with counts and examples (exit 4);
    /// for after a staging sale: it reads every ledger entry, order and outbox message
    Conform {
        /// Activity id
        activity: String,
        /// How far the database's clock and Redis's may lie apart, in ms (the window and the
        /// order of a death and its return are judged with this slack)
        #[arg(long, value_name = "MS", default_value_t = 1000)]
        clock_slack_ms: u32,
    },
    /// Rewrite Redis from database truth (compare-and-set), return orphaned deductions
    Fix {
        /// Activity id
        activity: String,
        /// Only this product
        #[arg(long, value_name = "P")]
        product: Option<String>,
        /// Do not ask for confirmation (required without a terminal)
        #[arg(long)]
        yes: bool,
        /// Show before and after per product, write nothing
        #[arg(long, conflicts_with = "yes")]
        preview: bool,
    },
    /// The compensation queue: deductions whose outcome is unknown
    #[command(subcommand)]
    Compensation(CompensationCommand),
    /// The worker as app servers: the same Lua deduction, then order and outbox in one
    /// transaction, a payment step; for demo and staging (it writes real orders)
    Load(LoadArgs),
    /// The worker on a shadow copy of the activity (own key prefix, temporary database):
    /// invariants and figures, one strategy or all four side by side
    DryRun(DryRunArgs),
    /// Delete this activity's keys (and no one else's); refused while it is live unless --force
    Cleanup {
        /// Activity id
        activity: String,
        /// Delete even while the activity is live
        #[arg(long)]
        force: bool,
    },
    /// Stop selling: every product of the activity, or those given (deductions answer -5)
    Pause(PauseArgs),
    /// Sell again what pause stopped: every product of the activity, or those given
    Resume(PauseArgs),
    /// The audit trail: every write the console made, newest first
    Audit(AuditArgs),
    /// Add units to a product during its sale (or take unsold ones away): the database and
    /// Redis move together
    Topup(TopupArgs),
    /// Poll the activity and print one line per alert raised or cleared and per state change;
    /// --exec runs a command for each newly raised critical alert (for systemd and pagers)
    Watch(WatchArgs),
    /// The incident report: window, sales per product, the verdict now, the compensation
    /// queue's history, every console write and fix in the period (Markdown or JSON)
    Report(ReportArgs),
    /// Serve the console's truth as Prometheus metrics (/metrics) with a health check
    /// (/healthz), polling like `watch` on its own interval; run it with --read-only
    Exporter(ExporterArgs),
    /// Print the shell completion script for bash, zsh or fish (e.g. `seckill-console
    /// completions bash > /etc/bash_completion.d/seckill-console`)
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Print the man page (roff): `seckill-console man | man -l -`; `--dir DIR` writes it and
    /// one page per subcommand there (seckill-console.1, seckill-console-watch.1, ...)
    Man {
        /// Write every page into this directory instead of printing the main one
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// `exporter`.
#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Activities to export (default: every live or upcoming one, at most 20)
    pub activities: Vec<String>,
    /// Address to serve /metrics and /healthz on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    pub listen: String,
    /// Seconds between polls (a scrape reads the last poll's figures, never Redis)
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub interval: f64,
}

/// The shells `completions` writes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// `report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Activity id
    pub activity: String,
    /// Only writes and compensation entries newer than this: a duration (2h) or an RFC 3339 time
    #[arg(long, value_name = "DURATION|TIME")]
    pub since: Option<String>,
    /// Markdown tables to paste into a ticket, or JSON with the same content
    #[arg(long, value_enum, default_value_t = ReportFormat::Markdown)]
    pub format: ReportFormat,
}

/// The report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Markdown,
    Json,
}

/// `watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Activity id
    pub activity: String,
    /// Seconds between polls
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub interval: f64,
    /// Stop after this many polls (default: until Ctrl-C or SIGTERM)
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Run this shell command for each newly raised critical alert (its JSON on stdin)
    #[arg(long, value_name = "CMD")]
    pub exec: Option<String>,
    /// The least severity `--exec` pages: `warning` pages warnings too
    #[arg(long, value_enum, value_name = "SEVERITY", default_value_t = PageSeverity::Critical)]
    pub exec_severity: PageSeverity,
    /// Exit 3 when Redis or the database stays unreachable this long
    #[arg(long, value_name = "S", default_value_t = 60)]
    pub give_up_secs: u64,
}

/// The alerts `watch --exec` pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PageSeverity {
    Warning,
    Critical,
}

/// `topup`.
#[derive(Debug, Args)]
pub struct TopupArgs {
    /// Activity id
    pub activity: String,
    /// The product
    #[arg(long, value_name = "P")]
    pub product: String,
    /// Units to add; negative takes unsold units away
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub add: i64,
    /// Do not ask for confirmation (required without a terminal)
    #[arg(long)]
    pub yes: bool,
    /// Why, for the audit trail
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub reason: String,
}

/// `pause` and `resume`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// Activity id
    pub activity: String,
    /// Only this product (repeat for more); without it, every product of the activity
    #[arg(long = "product", value_name = "P")]
    pub products: Vec<String>,
    /// Do not ask for confirmation (required without a terminal)
    #[arg(long)]
    pub yes: bool,
    /// Why, for the audit trail
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub reason: String,
}

/// `audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this activity
    pub activity: Option<String>,
    /// Only entries newer than this: a duration (30m, 2h, 1d) or an RFC 3339 time
    #[arg(long, value_name = "DURATION|TIME")]
    pub since: Option<String>,
    /// At most this many entries
    #[arg(long, default_value_t = 100)]
    pub limit: i64,
    /// Only this action (`pause`, `fix.restore`, `preheat`, ...)
    #[arg(long)]
    pub action: Option<String>,
    /// Only writes by this actor (`--by`: the global `--actor`, which `SECKILL_ACTOR` may set, is
    /// the name this console writes under, and must not narrow what it reads)
    #[arg(long = "by", value_name = "ACTOR")]
    pub by: Option<String>,
    /// Only this product's entries
    #[arg(long, value_name = "P")]
    pub product: Option<String>,
}

/// `activity ...`
#[derive(Debug, Subcommand)]
pub enum ActivityCommand {
    /// Import an activity and its products from a TOML file (one transaction)
    Import {
        /// The TOML file
        file: PathBuf,
    },
    /// List activities
    List,
    /// Show one activity and its products
    Show {
        /// Activity id
        activity: String,
    },
}

/// `compensation ...`
#[derive(Debug, Subcommand)]
pub enum CompensationCommand {
    /// List the entries of an activity (pending first) with their age and status
    List {
        /// Activity id
        activity: String,
        /// At most this many entries
        #[arg(long, default_value_t = 1000)]
        limit: i64,
    },
    /// Resolve pending entries from the ledger and the orders (applied / returned / not_applied)
    Resolve {
        /// Activity id
        activity: String,
        /// Only this request id
        #[arg(long, value_name = "R", conflicts_with = "all")]
        request: Option<String>,
        /// Every pending entry
        #[arg(long)]
        all: bool,
    },
}

/// `load A ...`
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Activity id
    pub activity: String,
    /// Distinct buyers
    #[arg(long)]
    pub buyers: usize,
    /// Requests in flight at once
    #[arg(long)]
    pub concurrency: usize,
    /// Requests per second over all buyers (default: as fast as they go)
    #[arg(long)]
    pub rate: Option<f64>,
    /// Share of buyers who click repeatedly (0 to 1)
    #[arg(long, default_value_t = 0.1)]
    pub repeat_share: f64,
    /// Faults: crash-between=P, timeout=P, script-flush (comma-separated)
    #[arg(long)]
    pub faults: Option<String>,
    /// Share of orders that get paid; the rest expire and return their stock
    #[arg(long, default_value_t = 0.8)]
    pub pay_share: f64,
    /// Seconds before an unpaid order expires
    #[arg(long, default_value_t = 2.0)]
    pub payment_window_secs: f64,
    /// The deduction strategy (lua: what app servers run; hincrby and lock to rehearse their
    /// failure modes on staging)
    #[arg(long, value_enum, default_value_t = LoadStrategyArg::Lua)]
    pub strategy: LoadStrategyArg,
    /// Seed of the demand (same seed, same demand)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Retries of a request whose outcome is unknown, with the same request id (Lua only)
    #[arg(long, default_value_t = 2)]
    pub retries: u32,
    /// Drill: stamp orders, payments and expiries this many ms off (negative: an app server or
    /// database clock behind Redis's)
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    pub clock_skew_ms: i64,
    /// Drill: commit each batch of orders up to this many ms after its stamp (late commits)
    #[arg(long, default_value_t = 0)]
    pub commit_delay_ms: u64,
    /// Do not ask for confirmation (required without a terminal)
    #[arg(long)]
    pub yes: bool,
}

/// Which strategy `load` runs (the SQL strategy needs a dry run's own tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadStrategyArg {
    Lua,
    Hincrby,
    Lock,
}

/// Which strategies a dry run compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StrategyArg {
    Lua,
    Hincrby,
    Lock,
    Sql,
    All,
}

/// `dry-run A ...`
#[derive(Debug, Args)]
pub struct DryRunArgs {
    /// Activity id (its products are copied; nothing live is touched)
    pub activity: String,
    /// Distinct buyers
    #[arg(long)]
    pub buyers: usize,
    /// Requests in flight at once
    #[arg(long)]
    pub concurrency: usize,
    /// The deduction strategy, or all four side by side
    #[arg(long, value_enum, default_value_t = StrategyArg::Lua)]
    pub strategy: StrategyArg,
    /// Share of buyers who click repeatedly (0 to 1)
    #[arg(long, default_value_t = 0.1)]
    pub repeat_share: f64,
    /// Faults: crash-between=P, timeout=P, script-flush (comma-separated)
    #[arg(long)]
    pub faults: Option<String>,
    /// Requests per second over all buyers (default: as fast as they go)
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seed of the demand (same seed, same demand)
    #[arg(long)]
    pub seed: Option<u64>,
    /// Key prefix of the shadow copy (default: PREFIX-dry-RUN); never the live prefix
    #[arg(long)]
    pub shadow_prefix: Option<String>,
}

/// `demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Buyers' requests per second
    #[arg(long, default_value_t = 25.0)]
    pub rate: f64,
    /// Seconds before the demo's first fault (lost writes), the second (a crashed rollback) and the third (its outbox relay held back for two minutes)
    #[arg(long, default_value_t = 20)]
    pub chaos_after_secs: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(names: &[&str]) -> std::collections::HashMap<String, String> {
        names
            .iter()
            .map(|n| (n.to_string(), "x".to_string()))
            .collect()
    }

    /// `--help` names each flag's variable and never its value: a Sentinel master's name, a
    /// URL or an actor set in the environment stays off the screen and out of pasted logs.
    #[test]
    fn help_never_shows_a_variables_value() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, shown: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                if a.get_env().is_some() && !a.is_hide_env_values_set() {
                    shown.push(format!("{} --{}", cmd.get_name(), a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, shown);
            }
        }
        let mut shown = Vec::new();
        walk(&Cli::command(), &mut shown);
        assert!(
            shown.is_empty(),
            "flags whose --help shows the value: {shown:?}"
        );
    }

    #[test]
    fn a_slip_for_a_setting_is_named_with_what_was_meant() {
        let warnings = misspelt_variables(&env_of(&[
            "SECKILL_REDIS",
            "SECKILL_REDIS_URI",
            "SECKILL_DB",
            "SECKILL_DATABASE",
            "SECKILL_GRACE_SEC",
            "SECKILL_REDIS_URL",
            "PATH",
        ]));
        assert_eq!(warnings.len(), 5, "{warnings:#?}");
        let about = |name: &str| {
            warnings
                .iter()
                .find(|w| w.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no warning about {name}: {warnings:#?}"))
                .clone()
        };
        assert!(about("SECKILL_REDIS").contains("SECKILL_REDIS_URL"));
        assert!(about("SECKILL_REDIS").contains("SECKILL_REDIS_CLUSTER"));
        assert!(about("SECKILL_REDIS_URI").contains("did you mean SECKILL_REDIS_URL?"));
        assert!(about("SECKILL_DB").contains("did you mean SECKILL_DATABASE_URL?"));
        assert!(about("SECKILL_DATABASE").contains("SECKILL_DATABASE_URL"));
        assert!(about("SECKILL_GRACE_SEC").contains("SECKILL_GRACE_SECS"));
        assert!(about("SECKILL_REDIS").contains("is ignored"));
    }

    /// Every setting, and every knob of the project's own tests and scripts, passes unremarked.
    #[test]
    fn settings_and_the_test_knobs_are_not_slips() {
        let settings = known_variables();
        assert!(settings.contains(&"SECKILL_REDIS_URL".to_string()));
        let names: Vec<&str> = settings.iter().map(String::as_str).collect();
        assert_eq!(misspelt_variables(&env_of(&names)), Vec::<String>::new());
        let knobs = [
            "SECKILL_CHAOS_CASES",
            "SECKILL_CHAOS_GRACE_MS",
            "SECKILL_CHAOS_LOG",
            "SECKILL_CHAOS_PARALLEL",
            "SECKILL_CHAOS_SEED",
            "SECKILL_CHAOS_SHRINK",
            "SECKILL_CHAOS_SHRINK_KINDS",
            "SECKILL_CHAOS_STEPS",
            "SECKILL_CHAOS_TOPOLOGY",
            "SECKILL_CHAOS_WITHOUT",
            "SECKILL_MODEL_SEEDS",
            "SECKILL_TEST_MYSQL_URL",
            "SECKILL_TEST_PG_URL",
            "SECKILL_TEST_REQUIRE_BACKENDS",
            "SECKILL_WATCH_DRILL_INTERVALS",
            "SECKILL_WATCH_DRILL_RATE",
            "SECKILL_WATCH_DRILL_SECS",
        ];
        assert_eq!(misspelt_variables(&env_of(&knobs)), Vec::<String>::new());
    }

    /// The usage line of a missing argument names what is missing, not the URLs the
    /// environment gave (clap lists every option it saw; the end-to-end test runs the binary
    /// with the variables set).
    #[test]
    fn the_usage_line_leaves_out_the_global_options() {
        let raw = "error: the following required arguments were not provided:\n  --product <P>\n  --add <N>\n\nUsage: seckill-console topup --product <P> --add <N> --redis <URL> --db <URL> --read-only --redis-cluster <URL,URL,...> <ACTIVITY>\n\nFor more information, try '--help'.\n";
        let text = trim_usage(raw);
        assert_eq!(
            text,
            "error: the following required arguments were not provided:\n  --product <P>\n  --add <N>\n\nUsage: seckill-console topup --product <P> --add <N> <ACTIVITY>\n\nFor more information, try '--help'.\n"
        );
    }
}
