//! A process's CPU time from `/proc/PID/stat`, for the benchmarks' figures.

/// Clock ticks per second of /proc's utime and stime (USER_HZ; 100 on Linux).
pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process (`pid`, or `self`), in seconds, every thread included; None when
/// it cannot be read.
pub fn cpu_of(pid: &str, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: the fields after it start past the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

/// [`cpu_of`] a process by its id, 0 when it cannot be read (a process that ended).
pub fn cpu_seconds(pid: u32) -> f64 {
    cpu_of(&pid.to_string(), clock_ticks()).unwrap_or(0.0)
}
