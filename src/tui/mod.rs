//! The terminal UI: what an on-call operator opens (no subcommand).
//!
//! The shape (the Elm architecture, as the ratatui templates use it, with gitui's components):
//! [`app::App`] holds the state the views share plus one component per view
//! ([`views::Views`]: each owns its cursor, rows, keys and drawing), and its `update` turns an
//! [`action::Action`] into state changes and [`action::Command`]s, without awaiting anything.
//! [`runtime`] owns the loop: terminal input arrives from a blocking thread, snapshots from
//! pollers in background tasks (`pollers.rs`), results of writes from the executor
//! (`executor.rs`), the live figures of a dry run from its own thread (`dry_run_job.rs`); all
//! of them are Actions on one channel. Views (`views/`) and widgets (`widgets/`) are functions
//! of `&App`. The render loop never awaits the network: a slow or stopped Redis or database
//! only makes the data older ("stale Ns" in the header).

pub mod action;
pub mod app;
pub mod cursor;
mod data;
mod detail;
mod dry_run;
mod dry_run_job;
mod event;
mod executor;
pub mod feed;
mod keys;
pub mod logs;
mod paging;
mod pollers;
pub mod priority;
pub mod runtime;
pub mod selected;
mod services;
pub mod terminal;
pub mod topup_form;
mod update;
pub mod view;
pub mod views;
pub mod widgets;
mod writes;

#[cfg(test)]
mod tests;

pub use action::{Action, Command};
pub use app::{App, AppConfig};
pub use runtime::{Headless, TuiOptions, run};
pub use view::View;
