//! Pieces shared by the views: header, footer, dialog, the filter line and the windowed table.

pub mod ascii;
pub mod columns;
pub mod dialog;
pub mod filter;
pub mod footer;
pub mod header;
pub mod pager;
pub mod table;

use ratatui::style::{Color, Modifier, Style};

/// Rows that need the operator's eyes now.
pub fn critical() -> Style {
    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
}

/// Rows that need a look.
pub fn warning() -> Style {
    Style::default().fg(Color::Yellow)
}

/// Healthy figures.
pub fn good() -> Style {
    Style::default().fg(Color::Green)
}

/// Less important text.
pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Titles and headers.
pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// Cuts `s` to `max` characters, marking the cut with "...", so a long value never breaks a
/// line layout.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    if max <= 3 {
        return s.chars().take(max).collect();
    }
    let mut out: String = s.chars().take(max - 3).collect();
    out.push_str("...");
    out
}
