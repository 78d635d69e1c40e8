//! The Lua scripts, embedded from `lua/` at build time so the binary runs exactly the files the
//! shop's app servers load. Called with EVALSHA; on a NOSCRIPT reply (a restart, a failover, a
//! SCRIPT FLUSH) the caller sends the same call with EVAL and the body, which runs the script
//! and caches it in one step (see `redis::eval`); there is no SCRIPT LOAD and no second retry.

use std::sync::OnceLock;

/// One Lua script of the contract.
pub struct LuaScript {
    pub name: &'static str,
    pub body: &'static str,
    sha: OnceLock<String>,
}

impl LuaScript {
    const fn new(name: &'static str, body: &'static str) -> Self {
        LuaScript {
            name,
            body,
            sha: OnceLock::new(),
        }
    }

    /// The SHA1 that SCRIPT LOAD returns for this body.
    pub fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| crate::domain::digest::sha1_hex(self.body))
    }
}

impl std::fmt::Debug for LuaScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LuaScript({}, {})", self.name, self.sha())
    }
}

/// The deduction app servers run: returns remaining stock or -1..-5.
pub static DEDUCT: LuaScript = LuaScript::new("deduct", include_str!("../../lua/deduct.lua"));

/// Returns the stock of one deduction, idempotent per request id.
pub static RESTORE: LuaScript = LuaScript::new("restore", include_str!("../../lua/restore.lua"));

/// The console's rewrite of a product's stock: by its offset from the counters, or of an
/// absent or corrupt key (preheat, fix).
pub static SET_STOCK: LuaScript =
    LuaScript::new("set_stock", include_str!("../../lua/set_stock.lua"));

/// A product's first write (preheat of a product Redis holds nothing of): every key in one
/// light call, only while none exists.
pub static FIRST: LuaScript = LuaScript::new("first", include_str!("../../lua/first.lua"));

/// Records deductions that live orders prove and the ledger lacks (preheat after a key loss,
/// fix of sales Redis forgot).
pub static RECORD: LuaScript = LuaScript::new("record", include_str!("../../lua/record.lua"));

/// Pauses or resumes one product (the deduction answers -5 while paused).
pub static PAUSE: LuaScript = LuaScript::new("pause", include_str!("../../lua/pause.lua"));

/// A live top-up: the stock and the meta `initial` move by the same change, once per id.
pub static TOPUP: LuaScript = LuaScript::new("topup", include_str!("../../lua/topup.lua"));

/// Compare-and-delete of a lock (the `lock` strategy of dry runs).
pub static UNLOCK: LuaScript = LuaScript::new("unlock", include_str!("../../lua/unlock.lua"));

/// A rebuild's hold on a product: the stock key goes, a marker names the holder.
pub static FREEZE: LuaScript = LuaScript::new("freeze", include_str!("../../lua/freeze.lua"));

/// Buyers' holdings rebuilt from the ledger while a rebuild holds the product.
pub static HOLDINGS: LuaScript = LuaScript::new("holdings", include_str!("../../lua/holdings.lua"));

/// An activity's new sale window into a preheated product's meta hash (a re-import that moved
/// the window).
pub static WINDOW: LuaScript = LuaScript::new("window", include_str!("../../lua/window.lua"));

/// The check before a console write: which commands the connected user may not run
/// (`redis.acl_check_cmd`; writes nothing).
pub static PROBE: LuaScript = LuaScript::new("probe", include_str!("../../lua/probe.lua"));

/// Every script the console loads on every node.
pub fn all() -> [&'static LuaScript; 12] {
    [
        &DEDUCT, &RESTORE, &SET_STOCK, &FIRST, &RECORD, &PAUSE, &TOPUP, &UNLOCK, &FREEZE,
        &HOLDINGS, &PROBE, &WINDOW,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha_is_the_sha1_of_the_body() {
        assert_eq!(DEDUCT.sha().len(), 40);
        assert_ne!(DEDUCT.sha(), RESTORE.sha());
        assert_eq!(
            LuaScript::new("x", "return 1").sha(),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }
}
