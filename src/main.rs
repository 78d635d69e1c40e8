//! The `seckill-console` binary: parse the command line, set up logging, hand over.
//!
//! The command line (`cli`) and the headless commands (`commands`) live in this crate, above
//! the library: the library (including the TUI) cannot name them, which the compiler checks.

mod cli;
mod commands;

use seckill_console::ErrorKind;
use std::process::ExitCode;

fn main() -> ExitCode {
    let (args, env) = match utf8_args_and_env() {
        Ok(both) => both,
        Err(what) => {
            eprintln!("error: {what} is not valid UTF-8: give it as UTF-8 text");
            return exit(ErrorKind::BadInput.exit_code());
        }
    };
    let cli = match cli::parse(&args, &env) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind as Clap;
            if matches!(
                e.kind(),
                Clap::DisplayHelp
                    | Clap::DisplayVersion
                    | Clap::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let mut text = cli::trim_usage(&seckill_console::redact::redact_text(
                &e.render().to_string(),
            ));
            if let Some(negative) = cli::negative_value(&args, &e) {
                text = negative;
            }
            if let Some(var) = bad_value_from_env(&e) {
                text = text.replacen(
                    '\n',
                    &format!(" (set by the environment variable {var})\n"),
                    1,
                );
            }
            if cli::json_requested_raw(&args, &env) {
                // The message whole (clap puts what is missing on the lines after its first),
                // up to the usage and tips.
                let message = text
                    .lines()
                    .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more"))
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                let first = message.trim_start_matches("error: ");
                let first = if first.is_empty() {
                    "usage error"
                } else {
                    first
                };
                eprintln!(
                    "{}",
                    serde_json::json!({ "error": first, "kind": ErrorKind::BadInput.as_str() })
                );
            } else {
                eprint!("{text}");
            }
            return exit(ErrorKind::BadInput.exit_code());
        }
    };
    init_logging(&env);
    for warning in cli::misspelt_variables(&env) {
        tracing::warn!("{warning}");
    }
    // The live view (no subcommand, or the demo) yields the CPU to the sale it watches; before
    // the runtime and the pools start, so that their threads inherit it.
    if matches!(cli.command, None | Some(cli::Command::Demo(_))) {
        use seckill_console::tui::priority;
        let nice = priority::wanted(env.get("SECKILL_NICE").map(String::as_str)).unwrap_or_else(
            |warning| {
                tracing::warn!("{warning}");
                priority::DEFAULT_NICE
            },
        );
        if !priority::lower(nice) {
            tracing::warn!("could not lower the console's CPU priority (nice {nice})");
        }
    }
    // One thread: on a small machine the Redis server needs the other core, and a command's
    // pipelines gain nothing from hopping between worker threads (measured: preheat and load
    // are faster this way).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit(ErrorKind::Internal.exit_code());
        }
    };
    let code = runtime.block_on(commands::run(cli));
    // Background tasks (pollers, pools) must not keep a finished command alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    exit(code)
}

/// The command line and the environment as text. `env::args()` and `env::vars()` panic on a
/// value that is not UTF-8; here such an argument, or such a variable of the console's own
/// (`SECKILL_*`), is named and refused. Another program's variable that is not UTF-8 is none of
/// the console's business: it is left out.
fn utf8_args_and_env() -> Result<(Vec<String>, std::collections::HashMap<String, String>), String> {
    let mut args = Vec::new();
    for (i, a) in std::env::args_os().enumerate() {
        match a.into_string() {
            Ok(a) => args.push(a),
            Err(raw) if i == 0 => args.push(raw.to_string_lossy().into_owned()),
            Err(raw) => {
                return Err(format!(
                    "argument {i} ({})",
                    seckill_console::redact::redact_text(&raw.to_string_lossy())
                ));
            }
        }
    }
    let mut env = std::collections::HashMap::new();
    for (name, value) in std::env::vars_os() {
        let ours = name.to_string_lossy().starts_with("SECKILL_");
        match (name.into_string(), value.into_string()) {
            (Ok(n), Ok(v)) => {
                env.insert(n, v);
            }
            (Ok(n), Err(_)) if ours => return Err(format!("the environment variable {n}")),
            _ => {}
        }
    }
    Ok((args, env))
}

/// The process exit status for a contract code (every code comes from an `ErrorKind`).
fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The variable that held a value clap refused, when the value came from the environment.
fn bad_value_from_env(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let arg = match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(s) => s.clone(),
        _ => return None,
    };
    let value = match e.get(ContextKind::InvalidValue)? {
        ContextValue::String(s) => s.clone(),
        _ => return None,
    };
    // "--grace-secs <SECS>" -> "grace-secs"
    let long = arg
        .trim_start_matches('-')
        .split([' ', '='])
        .next()?
        .to_string();
    cli::env_source(&long, &value)
}

/// Logs go to stderr, filtered by SECKILL_LOG (default: warnings). Log lines only ever carry
/// redacted URLs.
fn init_logging(env: &std::collections::HashMap<String, String>) {
    // Whatever the operator asks for, sqlx's parser of PostgreSQL URLs stays quiet below an
    // error: it logs an unknown connection parameter with its value (`sslpassword=...`).
    let filter = format!(
        "{},sqlx_postgres::options=error",
        env.get("SECKILL_LOG").map_or("warn", String::as_str)
    );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        // stderr, except while the TUI owns the terminal: then lines wait for its exit.
        .with_writer(seckill_console::tui::logs::writer)
        .with_target(false)
        // Colour only for a person at a terminal: a file, a pipe or journald gets plain text.
        .with_ansi(stderr_is_terminal() && !env.contains_key("NO_COLOR"))
        .try_init();
}

fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}
