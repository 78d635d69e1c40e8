//! seckill-console: the ops console for flash-sale stock held in Redis, with the SQL database as
//! the truth. The library holds everything but the command line: the binary (`main.rs`, with
//! `cli` and `commands`) parses arguments and calls in. The layers are listed in
//! `layering.rs` (checked by its tests) and explained in ARCHITECTURE.md.

pub mod config;
pub mod ctx;
pub mod db;
pub mod demo;
pub mod domain;
pub mod error;
pub mod ops;
pub mod redact;
pub mod redis;
pub mod render;
pub mod tui;
pub mod worker;

pub use error::{Error, ErrorKind, Result};

#[cfg(test)]
mod layering;
