//! The header: which activity, how Redis and the database answer (redacted URLs only), the
//! read-only badge and how old the numbers on screen are.

use super::{bold, clip, critical, dim, fit_line, good, warning};
use crate::tui::app::App;
use crate::tui::data::Link;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::Paragraph;

/// From this age on, the header names how long ago the least recently read keys were read.
const KEYS_AGE_SHOWN: u64 = 5;

/// "data 1s old", "stale 12s" or why there are no numbers.
pub fn age_text(app: &App) -> (String, Style) {
    if app.activity.is_none() {
        return ("no activity selected".into(), dim());
    }
    let (text, style) = match app.data_age() {
        None if app.stock.settling.is_some() => (String::new(), warning()),
        None if app.stock.feed.error.is_some() => ("no data: see below".into(), critical()),
        None => ("waiting for data".into(), dim()),
        Some(age) if app.is_stale() => (format!("stale {}s", age.as_secs()), critical()),
        Some(age) => (format!("data {}s old", age.as_secs()), good()),
    };
    // A quiet product's keys are read whole in turns (its stream is asked in between, which a
    // key set or deleted by hand does not move): the header says how old that can be, so "data
    // 1s old" is not read as true of a figure a minute old.
    let text = match app.stock.report().and_then(|r| r.keys_age_secs) {
        Some(k) if k >= KEYS_AGE_SHOWN && !text.is_empty() => format!("{text}, keys ≤{k}s"),
        _ => text,
    };
    // A cold settle of a big sale runs beside the polls for longer than a poll's deadline:
    // the header says how far it read, so old or absent numbers are not taken for a hang.
    match app.stock.settling {
        Some(p) if text.is_empty() => (format!("settling {p}%"), style),
        Some(p) => (format!("{text}, settling {p}%"), style),
        None => (text, style),
    }
}

/// "Redis ● up redis://host:port": the state word and the redacted label. The reason of a
/// failure is in the view (under its table), where there is room for it.
fn link(name: &str, label: &str, state: &Link, width: usize) -> Vec<Span<'static>> {
    let (dot, text, style) = match state {
        Link::Connecting => ("○", "connecting", dim()),
        Link::Up => ("●", "up", good()),
        Link::Degraded(_) => ("◐", "degraded", warning()),
        Link::Down(_) => ("✗", "down", critical()),
    };
    let room = width.saturating_sub(name.len() + text.len() + 5).max(8);
    vec![
        Span::styled(format!("{name} "), bold()),
        Span::styled(format!("{dot} {text} "), style),
        Span::raw(clip(label, room)),
    ]
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let width = usize::from(area.width);
    let mut first = vec![Span::styled(" seckill-console ", bold()), Span::raw("│ ")];
    match &app.activity {
        Some(id) => {
            first.push(Span::raw("activity "));
            first.push(Span::styled(id.to_string(), bold().fg(Color::Cyan)));
            if let Some(r) = app.stock.report() {
                first.push(Span::raw(format!(" ({})", r.phase.as_str())));
            }
        }
        None => first.push(Span::styled("no activity", dim())),
    }
    let (age, style) = age_text(app);
    first.push(Span::raw(" │ "));
    first.push(Span::styled(age, style));
    if app.config.read_only {
        first.push(Span::raw(" │ "));
        first.push(Span::styled(
            " READ-ONLY ",
            Style::default()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
        ));
    }
    // Trouble elsewhere: the other activities with alerts, so a quiet screen never hides
    // another sale breaking. Before the zone, so a narrow terminal cuts the zone first.
    let others = app.views.activities.others_alerting(app);
    if let Some((top, n)) = others.first() {
        let more = match others.len() {
            1 => String::new(),
            k => format!(" +{} more", k - 1),
        };
        first.push(Span::raw(" │ "));
        first.push(Span::styled(
            format!("! {top}: {n} alert(s){more}"),
            critical(),
        ));
    }
    first.push(Span::raw(" │ "));
    first.push(Span::styled(app.config.tz.name(), dim()));
    let half = width.saturating_sub(4) / 2;
    let mut second = vec![Span::raw(" ")];
    // Behind Sentinel: the primary followed now, and when it last changed.
    let redis_label = match app.stock.report().and_then(|r| r.master.as_ref()) {
        Some(m) => {
            let since = m
                .changed_at
                .map(|at| format!(", since {}", app.config.tz.show(at)))
                .unwrap_or_default();
            format!("{} master {}{since}", app.config.redis_label, m.addr)
        }
        None => app.config.redis_label.clone(),
    };
    second.extend(link("Redis", &redis_label, &app.redis_link(), half));
    second.push(Span::raw(" │ "));
    second.extend(link("DB", &app.config.db_label, &app.db_link(), half));
    frame.render_widget(
        Paragraph::new(vec![fit_line(first, width), fit_line(second, width)]),
        area,
    );
}
