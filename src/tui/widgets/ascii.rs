//! The screen in ASCII for a terminal that cannot draw Unicode (`TERM=dumb`, a non-UTF-8
//! locale, or `SECKILL_ASCII=1`): after a frame is laid out, every cell that is not ASCII gets
//! an ASCII stand-in (borders `+ - |`, gauges `#` and `.`, chart dots `*`, arrows `^ v < >`, the
//! overflow mark `~`, anything else `?`). One pass over the frame in one place, so no view can
//! forget a glyph.

use ratatui::buffer::Buffer;

/// Whether the screen should be ASCII, from the environment's values: `force` is
/// `SECKILL_ASCII` (1 or 0 decides), then `TERM=dumb`, then the locale that decides the
/// character set (`LC_ALL`, else `LC_CTYPE`, else `LANG`): set and not UTF-8 means ASCII.
/// Nothing set at all keeps Unicode.
pub fn wanted(
    force: Option<&str>,
    term: Option<&str>,
    (lc_all, lc_ctype, lang): (Option<&str>, Option<&str>, Option<&str>),
) -> bool {
    match force.map(str::trim) {
        Some("1") => return true,
        Some("0") => return false,
        _ => {}
    }
    if term == Some("dumb") {
        return true;
    }
    let locale = [lc_all, lc_ctype, lang]
        .into_iter()
        .flatten()
        .find(|v| !v.is_empty());
    locale.is_some_and(|l| {
        let l = l.to_ascii_lowercase();
        !(l.contains("utf-8") || l.contains("utf8"))
    })
}

/// From this process's environment.
pub fn from_env() -> bool {
    let var = |k: &str| std::env::var(k).ok();
    wanted(
        var("SECKILL_ASCII").as_deref(),
        var("TERM").as_deref(),
        (
            var("LC_ALL").as_deref(),
            var("LC_CTYPE").as_deref(),
            var("LANG").as_deref(),
        ),
    )
}

/// The ASCII stand-in of one glyph.
pub fn stand_in(c: char) -> char {
    match c {
        c if c.is_ascii() => c,
        // Box drawing: lines, then corners and tees.
        '─' | '━' | '═' | '╌' | '┄' => '-',
        '│' | '┃' | '║' | '╎' | '┆' => '|',
        '\u{2500}'..='\u{257F}' => '+',
        // Blocks and shades: gauges and sparklines.
        '░' => '.',
        '▒' => ':',
        '▁' | '▂' => '_',
        '▃' | '▄' => '=',
        '\u{2580}'..='\u{259F}' => '#',
        // Braille (charts): a blank cell stays blank.
        '\u{2800}' => ' ',
        '\u{2801}'..='\u{28FF}' => '*',
        '↑' | '▲' => '^',
        '↓' | '▼' => 'v',
        '→' | '▶' => '>',
        '←' | '◀' => '<',
        '…' => '~',
        '●' | '•' | '·' | '◆' => '*',
        '◐' | '◑' => '~',
        '○' => 'o',
        '✗' | '✘' | '×' => 'x',
        '✓' | '✔' => 'v',
        _ => '?',
    }
}

/// Rewrites every non-ASCII cell of `buf` with its stand-in.
pub fn downgrade(buf: &mut Buffer) {
    for cell in buf.content.iter_mut() {
        let sym = cell.symbol();
        if sym.is_ascii() {
            continue;
        }
        let mut out = String::with_capacity(sym.len());
        for c in sym.chars() {
            // Combining marks and the like add nothing an ASCII terminal can show.
            if unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) > 0 || c.is_ascii() {
                out.push(stand_in(c));
            }
        }
        if out.is_empty() {
            out.push(' ');
        }
        cell.set_symbol(&out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_decides_as_documented() {
        let none = (None, None, None);
        assert!(!wanted(None, Some("xterm"), none), "nothing set: Unicode");
        assert!(wanted(None, Some("dumb"), none));
        assert!(!wanted(Some("0"), Some("dumb"), none), "forced off");
        assert!(wanted(
            Some("1"),
            Some("xterm"),
            (None, None, Some("C.UTF-8"))
        ));
        assert!(wanted(None, Some("xterm"), (None, None, Some("C"))));
        assert!(!wanted(
            None,
            Some("xterm"),
            (None, None, Some("en_US.UTF-8"))
        ));
        // LC_ALL wins over LANG.
        assert!(wanted(
            None,
            None,
            (Some("POSIX"), None, Some("en_US.utf8"))
        ));
    }

    #[test]
    fn glyphs_have_ascii_stand_ins() {
        let s: String = "┌─┐│█░…↑↓●◐✗⣿⠀手".chars().map(stand_in).collect();
        assert_eq!(s, "+-+|#.~^v*~x* ?");
    }
}
