//! The live view yields the CPU to the sale it watches.
//!
//! Where the console shares a host with app servers or with Redis (a small box at launch, a
//! bastion that also runs a gateway), every millisecond it spends decoding the feed of changed
//! orders is a millisecond a buyer's request waits for. Measured on the 2-core benchmark
//! machine: at 75,000 deductions a second the view used about a tenth of a core, and the
//! buyers' p99 rose by about that share. A monitor should be the one that waits, so the live
//! view lowers its own scheduling priority (nice) before it starts any thread; a busy host
//! then makes the view's refreshes later ("stale Ns" in the header), never the sale slower.

/// The niceness the live view takes unless `SECKILL_NICE` says otherwise (0 keeps the
/// priority it was started with; the kernel lets a process lower itself, never raise).
pub const DEFAULT_NICE: i32 = 10;

/// Reads `SECKILL_NICE`: an integer 0..=19, else the default (a bad value is named in the
/// warning the caller logs).
pub fn wanted(env: Option<&str>) -> Result<i32, String> {
    match env.map(str::trim) {
        None | Some("") => Ok(DEFAULT_NICE),
        Some(v) => match v.parse::<i32>() {
            Ok(n) if (0..=19).contains(&n) => Ok(n),
            _ => Err(format!(
                "SECKILL_NICE={v:?} is not a niceness from 0 to 19; using {DEFAULT_NICE}"
            )),
        },
    }
}

/// Lowers the calling thread's priority to niceness `nice` unless it is lower already (and so that of every thread it starts
/// afterwards: on Linux the niceness is per thread and inherited). Call it before the async
/// runtime and the database pools start. Returns false when the system refused (then the view
/// simply runs at its usual priority).
pub fn lower(nice: i32) -> bool {
    if nice <= 0 {
        return true;
    }
    #[cfg(unix)]
    {
        // Never raise: a console started under `nice -n 15` stays there.
        match rustix::process::getpriority_process(None) {
            Ok(now) if now >= nice => true,
            _ => rustix::process::setpriority_process(None, nice).is_ok(),
        }
    }
    #[cfg(not(unix))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_niceness_is_read_from_the_environment_and_bounded() {
        assert_eq!(wanted(None), Ok(DEFAULT_NICE));
        assert_eq!(wanted(Some("")), Ok(DEFAULT_NICE));
        assert_eq!(wanted(Some("0")), Ok(0));
        assert_eq!(wanted(Some(" 19 ")), Ok(19));
        let bad = wanted(Some("-5")).expect_err("a raise is refused");
        assert!(bad.contains("\"-5\"") && bad.contains("0 to 19"), "{bad}");
        assert!(wanted(Some("20")).is_err());
        assert!(wanted(Some("ten")).is_err());
    }

    #[test]
    fn a_thread_that_lowers_itself_runs_at_that_niceness() {
        // On a thread of its own, so that the test runner's other threads keep theirs.
        std::thread::spawn(|| {
            #[cfg(target_os = "linux")]
            let before = rustix::process::getpriority_process(None).expect("nice");
            assert!(lower(3), "lowering one's own priority is always allowed");
            #[cfg(target_os = "linux")]
            assert_eq!(
                rustix::process::getpriority_process(None).expect("nice"),
                before.max(3)
            );
        })
        .join()
        .expect("the thread");
    }
}
