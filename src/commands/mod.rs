//! The headless commands: each calls the `ops` / `db` use case and renders its result as text or
//! as one JSON document, with the contract's exit codes.

pub mod activity;
pub mod conform;
pub mod control;
pub mod demo;
pub mod exporter;
pub mod manual;
pub mod ping;
pub mod preheat;
pub mod progress;
pub mod report;
pub mod status;
pub mod watch;
pub mod worker;

use crate::cli::{Cli, Command};
use seckill_console::config::{self, Config, Layer};
pub use seckill_console::ctx::Ctx;
use seckill_console::db::migrate;
use seckill_console::error::{Error, ErrorKind, Result};
pub use seckill_console::render::table;
use serde::Serialize;

/// What a command produced: the JSON document, the text for humans, and, when the command
/// ran to its end but its verdict is a failure (a no-go preheat, a drift under
/// `--fail-on-drift`), that failure's kind. A no-go report is a document *and* exit 4: the
/// exit code comes from the kind, as for every error, never from a number set by hand.
pub struct Outcome {
    pub doc: Doc,
    pub text: String,
    pub failure: Option<ErrorKind>,
}

/// A command's JSON document, written straight from its value when printed: a report of
/// 100,000 products is never held a second time as a JSON tree nor as one string (46 MB of
/// text, 100 MB of tree).
pub enum Doc {
    /// Nothing more to print (`watch` streamed its lines).
    Streamed,
    Value(Box<dyn Json>),
}

/// Where a JSON document goes: stdout, buffered.
type JsonOut<'a> = std::io::BufWriter<std::io::StdoutLock<'a>>;

/// A value that writes itself as pretty JSON.
pub trait Json: Send {
    /// The writer is the concrete buffered stdout, not `dyn Write`: the serializer writes a
    /// few bytes at a time, and a virtual call for each cost `status` of 100,000 products
    /// (tens of megabytes of JSON) a measurable part of its time.
    fn write_pretty(&self, out: &mut JsonOut<'_>) -> serde_json::Result<()>;
}

impl<T: Serialize + Send> Json for T {
    fn write_pretty(&self, out: &mut JsonOut<'_>) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }
}

impl Outcome {
    /// A successful result.
    pub fn ok<T: Serialize + Send + 'static>(doc: T, text: String) -> Result<Self> {
        Self::finished(doc, text, None)
    }

    /// A command that printed its own output as it went (`watch`): nothing more to print.
    pub fn silent() -> Self {
        Outcome {
            doc: Doc::Streamed,
            text: String::new(),
            failure: None,
        }
    }

    /// A result whose verdict may be a failure of this kind.
    pub fn finished<T: Serialize + Send + 'static>(
        doc: T,
        text: String,
        failure: Option<ErrorKind>,
    ) -> Result<Self> {
        Ok(Outcome {
            doc: Doc::Value(Box::new(doc)),
            text,
            failure,
        })
    }

    /// The process exit code: 0, or the failure's.
    pub fn exit_code(&self) -> i32 {
        self.failure.map_or(0, ErrorKind::exit_code)
    }
}

/// Builds the configuration: the file (`--config` / `SECKILL_CONFIG`) under the flags and their
/// environment variables (clap has already read those).
pub fn load_config(cli: &Cli) -> Result<Config> {
    let file = match &cli.global.config {
        Some(p) => config::read_file(p)?,
        None => Layer::default(),
    };
    config::resolve(&[file, cli.global.layer()])
}

/// Runs the parsed command line; returns the exit code. Output goes to stdout, errors to stderr.
pub async fn run(cli: Cli) -> i32 {
    if let Some(done) = manual::generate(cli.command.as_ref()) {
        return match done {
            Ok(text) => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&text).and_then(|()| out.flush());
                0
            }
            Err(e) => report_error(&e, cli.global.json),
        };
    }
    let config = match load_config(&cli) {
        Ok(c) => c,
        Err(e) => return report_error(&e, cli.global.json),
    };
    if !matches!(cli.command, Some(Command::Demo(_))) {
        // The commands that never open Redis say nothing of its settings (a cron job's
        // `audit` would warn on every run).
        let uses_redis = !matches!(
            cli.command,
            Some(
                Command::Migrate
                    | Command::Audit(_)
                    | Command::Activity(
                        crate::cli::ActivityCommand::List
                            | crate::cli::ActivityCommand::Show { .. }
                    )
            )
        );
        for warning in
            config::empty_variable_warnings(&config, uses_redis, |name| std::env::var(name).ok())
        {
            tracing::warn!("{warning}");
        }
    }
    let json = config.json;
    let ctx = Ctx { config };
    match dispatch(&ctx, cli.command).await {
        Ok(out) => {
            if json {
                if let Doc::Value(doc) = &out.doc
                    && let Err(e) = print_json(doc.as_ref())
                {
                    return report_error(&e, true);
                }
            } else {
                print_text(&out.text);
            }
            out.exit_code()
        }
        Err(e) => report_error(&e, json),
    }
}

async fn dispatch(ctx: &Ctx, command: Option<Command>) -> Result<Outcome> {
    match command {
        None => {
            seckill_console::tui::run(ctx, seckill_console::tui::TuiOptions::default()).await?;
            Ok(Outcome::silent())
        }
        Some(Command::Demo(args)) => demo::run_demo(ctx, args).await,
        Some(Command::Migrate) => migrate_command(ctx).await,
        Some(Command::Activity(cmd)) => activity::run(ctx, cmd).await,
        Some(Command::Ping) => ping::run(ctx).await,
        Some(Command::Preheat {
            activity,
            force,
            accept_eviction,
        }) => preheat::run_preheat(ctx, &activity, (force, accept_eviction)).await,
        Some(Command::Cleanup { activity, force }) => {
            preheat::run_cleanup(ctx, &activity, force).await
        }
        Some(Command::Status { activity }) => status::run_status(ctx, &activity).await,
        Some(Command::Conform {
            activity,
            clock_slack_ms,
        }) => conform::run_conform(ctx, &activity, clock_slack_ms).await,
        Some(Command::Reconcile {
            activity,
            fail_on_drift,
        }) => status::run_reconcile(ctx, &activity, fail_on_drift).await,
        Some(Command::Fix {
            activity,
            product,
            yes,
            preview,
        }) => status::run_fix(ctx, &activity, product, yes, preview).await,
        Some(Command::Compensation(cmd)) => status::run_compensation(ctx, cmd).await,
        Some(Command::Load(args)) => worker::run_load_command(ctx, args).await,
        Some(Command::DryRun(args)) => worker::run_dry_run(ctx, args).await,
        Some(Command::Pause(args)) => control::run_pause(ctx, args, true).await,
        Some(Command::Resume(args)) => control::run_pause(ctx, args, false).await,
        Some(Command::Audit(args)) => control::run_audit(ctx, args).await,
        Some(Command::Topup(args)) => control::run_topup(ctx, args).await,
        Some(Command::Report(args)) => report::run_report(ctx, args).await,
        Some(Command::Watch(args)) => watch::run_watch(ctx, args, ctx.config.json).await,
        Some(Command::Exporter(args)) => exporter::run_exporter(ctx, args).await,
        // Printed by `run` before any configuration is read.
        Some(Command::Completions { .. } | Command::Man { .. }) => Ok(Outcome::silent()),
    }
}

async fn migrate_command(ctx: &Ctx) -> Result<Outcome> {
    if ctx.config.read_only {
        return Err(Error::refused(
            "read-only mode: refused to apply migrations; run without --read-only",
        ));
    }
    if ctx.config.db_is_default
        && let Some(dir) = config::default_db_path().parent()
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::unavailable(format!("cannot create '{}': {e}", dir.display())))?;
    }
    let db = ctx.db_unchecked().await?;
    let report = migrate::migrate(&db).await?;
    let text = format!(
        "{}: schema version {} ({} applied now, {} already applied)\n",
        report.database,
        report.version,
        report.applied.len(),
        report.already_applied.len()
    );
    db.close().await;
    Outcome::ok(report, text)
}

/// Writes the document to stdout as it serializes, through one buffer. A reader that went
/// away (`| head`) ends the output quietly: what it wanted it has.
fn print_json(doc: &dyn Json) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let written = doc
        .write_pretty(&mut out)
        .map_err(std::io::Error::from)
        .and_then(|()| writeln!(out))
        .and_then(|()| out.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::internal(format!(
            "cannot write the result as JSON: {e}"
        ))),
        _ => Ok(()),
    }
}

/// Writes a command's text to stdout. A reader that went away (`| head`) ends the output
/// quietly and the command keeps its exit code (`print!` panicked on the closed pipe).
fn print_text(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Prints an error (one JSON object with `error` and `kind`, or one line) and returns its code.
pub fn report_error(e: &Error, json: bool) -> i32 {
    let message = seckill_console::redact::redact_text(&e.message);
    if json {
        let doc = serde_json::json!({ "error": message, "kind": e.kind.as_str() });
        eprintln!("{doc}");
    } else {
        eprintln!("error: {message}");
    }
    e.kind.exit_code()
}
