//! Unique tokens for the console's own writes (a rebuild's hold, a checkpoint's temporary key, a
//! top-up's id): two consoles must never pick the same one, even in two containers where both
//! run as pid 1 and start in the same millisecond.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 128 bits in hex: the process's random hash keys (seeded by the operating system) over the
/// time, the process id and a counter.
pub fn unique() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let word = |salt: u64| {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.write_u64(n);
        h.write_u64(salt);
        h.finish()
    };
    format!("{:016x}{:016x}", word(1), word(2))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_differ() {
        let a: std::collections::HashSet<String> = (0..1000).map(|_| super::unique()).collect();
        assert_eq!(a.len(), 1000);
        assert!(
            a.iter()
                .all(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        );
    }
}
