//! seckill-console: the ops console for flash-sale stock held in Redis, with the SQL database as
//! the truth. The binary is a thin shell over this library so tests reach everything.

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
