//! What `redis-benchmark -q` printed, as a figure.

/// The requests a second of `redis-benchmark -q` output: `EVALSHA ...: 123456.79 requests per
/// second, p50=...` (its last progress line wins); None when there is none.
pub fn rate(text: &str) -> Option<f64> {
    text.split(['\r', '\n'])
        .filter(|l| l.contains("requests per second"))
        .filter_map(|l| {
            l.split("requests per second")
                .next()?
                .rsplit(':')
                .next()?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .next_back()
}
