//! Columns sized to what they show. A number is drawn whole or, where even its column cannot
//! hold it, as an overflow mark (`…`): never a cut number (a right-aligned figure cut by the
//! terminal loses its leading digits and its sign, and `35567` reads like a value). When the
//! table is wider than the terminal, whole columns go first, least needed first; the columns an
//! operator acts on (the id, the drift, the state) stay.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// What a column holds, which decides its width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Text, left-aligned: as wide as its widest value in view, between `min` and `max`, cut
    /// with `…` beyond.
    Text { min: u16, max: u16 },
    /// A figure, right-aligned: as wide as its widest value in view.
    Number,
    /// A fixed width (a gauge), left-aligned.
    Fixed(u16),
    /// Text that takes the room the other columns leave (a message), at least `min` cells,
    /// cut with `…` beyond: it gives way before any column is dropped.
    Rest { min: u16 },
}

/// One column of a measured table.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub title: &'static str,
    pub kind: Kind,
    /// 0: never dropped; otherwise, the higher, the sooner it goes when the table is too wide.
    pub drop: u8,
}

impl Column {
    /// A figure column; `drop` as in [`Column::drop`].
    pub const fn number(title: &'static str, drop: u8) -> Column {
        Column {
            title,
            kind: Kind::Number,
            drop,
        }
    }

    /// A text column that takes the room the others leave, at least `min` cells.
    pub const fn rest(title: &'static str, min: u16) -> Column {
        Column {
            title,
            kind: Kind::Rest { min },
            drop: 0,
        }
    }

    /// A text column between `min` and `max` cells wide.
    pub const fn text(title: &'static str, (min, max): (u16, u16), drop: u8) -> Column {
        Column {
            title,
            kind: Kind::Text { min, max },
            drop,
        }
    }
}

/// The overflow mark: a value its column cannot hold.
pub const OVERFLOW: &str = "…";

/// Where each column is drawn: its width, or None when it was dropped for room.
pub fn widths(columns: &[Column], rows: &[Vec<String>], room: u16) -> Vec<Option<u16>> {
    layout(columns, rows, room, 0).widths
}

/// Where a table's columns go, `skip` of them scrolled out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Each column's width, or None when it is not drawn.
    pub widths: Vec<Option<u16>>,
    /// How far `l` may scroll: the fewest droppable columns to scroll out for every column
    /// right of them to fit (further would only blank columns).
    pub useful_skip: usize,
    /// Columns with something to show that are not drawn (scrolled out or dropped for room);
    /// a column with nothing in view (names no product has) is not counted.
    pub off_screen: usize,
}

/// [`widths`] with the first `skip` droppable columns scrolled out on the left (never more than
/// [`Layout::useful_skip`]), so that the columns dropped on the right come into view.
pub fn layout(columns: &[Column], rows: &[Vec<String>], room: u16, skip: usize) -> Layout {
    let natural = natural(columns, rows);
    let useful_skip = most_useful_skip(columns, &natural, room);
    let empty = natural.iter().filter(|w| w.is_none()).count();
    let widths = scrolled(columns, natural, room, skip.min(useful_skip));
    let off_screen = widths
        .iter()
        .filter(|w| w.is_none())
        .count()
        .saturating_sub(empty);
    Layout {
        widths,
        useful_skip,
        off_screen,
    }
}

/// The natural widths `w` fitted into `room`, the first `skip` droppable columns out.
fn scrolled(
    columns: &[Column],
    mut w: Vec<Option<u16>>,
    room: u16,
    skip: usize,
) -> Vec<Option<u16>> {
    // Scrolled out: the first droppable columns with something to show, left to right.
    let out: Vec<usize> = droppable(columns)
        .filter(|&i| w[i].is_some())
        .take(skip)
        .collect();
    for i in out {
        w[i] = None;
    }
    // Whole columns go, least needed first (the rightmost of equals), until the rest fits.
    while total(&w) > room {
        let victim = columns
            .iter()
            .enumerate()
            .filter(|(i, c)| c.drop > 0 && w[*i].is_some())
            .max_by_key(|(i, c)| (c.drop, *i))
            .map(|(i, _)| i);
        match victim {
            Some(i) => w[i] = None,
            None => break,
        }
    }
    // Still too wide: the text columns give way down to their minimum, then every column
    // shrinks from the right (a number that no longer fits shows the overflow mark).
    let mut over = total(&w).saturating_sub(room);
    for (i, c) in columns.iter().enumerate() {
        if let (Kind::Text { min, .. } | Kind::Rest { min }, Some(cur)) = (c.kind, w[i]) {
            let give = over.min(cur.saturating_sub(min));
            w[i] = Some(cur - give);
            over -= give;
        }
    }
    for slot in w.iter_mut().rev() {
        if over == 0 {
            break;
        }
        if let Some(cur) = slot {
            let give = over.min(cur.saturating_sub(1));
            *cur -= give;
            over -= give;
        }
    }
    // The room left goes to the column that takes the rest.
    let spare = room.saturating_sub(total(&w));
    if let Some(i) = columns
        .iter()
        .position(|c| matches!(c.kind, Kind::Rest { .. }))
        && let Some(cur) = w[i]
    {
        w[i] = Some(cur + spare);
    }
    w
}

/// Each column as wide as its widest value in view (its title included), within its bounds;
/// None for a droppable text column with nothing in view (no product has a name).
fn natural(columns: &[Column], rows: &[Vec<String>]) -> Vec<Option<u16>> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let values = rows
                .iter()
                .filter_map(|r| r.get(i))
                .map(|s| width(s))
                .max()
                .unwrap_or(0);
            if values == 0 && c.drop > 0 && matches!(c.kind, Kind::Text { .. }) && !rows.is_empty()
            {
                return None;
            }
            let widest = values.max(width(c.title));
            Some(match c.kind {
                Kind::Text { min, max } => widest.clamp(min, max.max(min)),
                Kind::Number => widest,
                Kind::Fixed(n) => n,
                // Its minimum here: it grows into what is left once the others are placed.
                Kind::Rest { min } => min,
            })
        })
        .collect()
}

/// The droppable columns' indexes, left to right: those `h` / `l` scroll out.
fn droppable(columns: &[Column]) -> impl Iterator<Item = usize> + '_ {
    columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.drop > 0)
        .map(|(i, _)| i)
}

/// The fewest droppable columns to scroll out for every column right of them to fit: `l`
/// stops there (it went on scrolling out columns with nothing left to bring into view).
fn most_useful_skip(columns: &[Column], natural: &[Option<u16>], room: u16) -> usize {
    let mut w = natural.to_vec();
    let mut skip = 0;
    // An empty column takes no room: scrolling it out would be a press that shows nothing.
    for i in droppable(columns).filter(|&i| natural[i].is_some()) {
        if total(&w) <= room {
            break;
        }
        w[i] = None;
        skip += 1;
    }
    skip
}

/// The width the drawn columns take, one space between two.
fn total(w: &[Option<u16>]) -> u16 {
    let shown: Vec<u16> = w.iter().flatten().copied().collect();
    let gaps = u16::try_from(shown.len().saturating_sub(1)).unwrap_or(u16::MAX);
    shown.iter().fold(gaps, |sum, n| sum.saturating_add(*n))
}

/// The text of a cell in a column `w` wide: whole when it fits; a number that does not is the
/// overflow mark, text is cut with it, after a whole word where one ends in the first half or
/// more (`paused -> …`, never `paused -> sellin…`, which reads as another word).
pub fn fit(kind: Kind, value: &str, w: u16) -> String {
    if width(value) <= w {
        return value.to_string();
    }
    match kind {
        Kind::Number => OVERFLOW.to_string(),
        Kind::Text { .. } | Kind::Fixed(_) | Kind::Rest { .. } => {
            // Whole characters while they and the mark fit (a wide one is never split).
            let mut out = String::new();
            let mut used: usize = 0;
            for ch in value.chars() {
                let cw = UnicodeWidthChar::width(ch).unwrap_or(0);
                if used + cw + 1 > usize::from(w) {
                    break;
                }
                used += cw;
                out.push(ch);
            }
            let cut_mid_word = value[out.len()..]
                .chars()
                .next()
                .is_some_and(|c| !c.is_whitespace())
                && out.chars().last().is_some_and(|c| !c.is_whitespace());
            if cut_mid_word
                && let Some(space) = out.rfind(char::is_whitespace)
                && space * 2 >= out.len()
            {
                // After the whole space, which may take more than one byte (a no-break or an
                // ideographic space).
                let len = out[space..].chars().next().map_or(1, char::len_utf8);
                out.truncate(space + len);
            }
            out.push_str(OVERFLOW);
            out
        }
    }
}

/// Display width, in terminal cells.
pub fn width(s: &str) -> u16 {
    u16::try_from(UnicodeWidthStr::width(s)).unwrap_or(u16::MAX)
}

pub use crate::render::grouped;

/// An integer with its sign always shown (a drift): `+123,459`, `-3`, `0`.
pub fn signed(n: i64) -> String {
    if n > 0 {
        format!("+{}", grouped(n))
    } else {
        grouped(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_grouped_with_their_sign() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_235_567), "1,235,567");
        assert_eq!(grouped(-2_002), "-2,002");
        assert_eq!(grouped(i64::MIN), "-9,223,372,036,854,775,808");
        assert_eq!(signed(123_459), "+123,459");
        assert_eq!(signed(-3), "-3");
        assert_eq!(signed(0), "0");
    }

    #[test]
    fn a_number_that_does_not_fit_is_the_overflow_mark() {
        assert_eq!(fit(Kind::Number, "1,235,567", 9), "1,235,567");
        assert_eq!(fit(Kind::Number, "1,235,567", 8), OVERFLOW);
        assert_eq!(
            fit(Kind::Text { min: 1, max: 9 }, "headphones", 6),
            "headp…"
        );
        assert_eq!(fit(Kind::Text { min: 1, max: 9 }, "商品四十二", 5), "商品…");
    }

    #[test]
    fn a_cut_after_a_wide_space_keeps_the_space_whole() {
        // A no-break space (2 bytes) and an ideographic one (3 bytes), as pasted names carry:
        // the cut after them once fell inside the character and panicked.
        let kind = Kind::Text { min: 1, max: 30 };
        assert_eq!(
            fit(kind, "Double 11 Mega\u{A0}FlashSaleForMembers", 24),
            "Double 11 Mega\u{A0}…"
        );
        assert_eq!(
            fit(kind, "双十一大促\u{3000}超级会员专享活动", 16),
            "双十一大促\u{3000}…"
        );
    }

    #[test]
    fn columns_drop_by_priority_and_keep_the_ones_acted_on() {
        let cols = [
            Column::text("product", (4, 20), 0),
            Column::number("initial", 3),
            Column::number("drift", 0),
            Column::number("rate", 5),
        ];
        let rows = vec![vec![
            "p0003".into(),
            "1,235,567".into(),
            "+123,459".into(),
            "1.0".into(),
        ]];
        let wide = widths(&cols, &rows, 80);
        assert_eq!(wide, vec![Some(7), Some(9), Some(8), Some(4)]);
        // 7 + 9 + 8 + 3 gaps = 27: rate goes first.
        assert_eq!(
            widths(&cols, &rows, 27),
            vec![Some(7), Some(9), Some(8), None]
        );
        // Then initial; the drift stays.
        assert_eq!(widths(&cols, &rows, 20), vec![Some(7), None, Some(8), None]);
        // Narrower still: the product gives way to its minimum, then the drift shows `…`.
        assert_eq!(widths(&cols, &rows, 13), vec![Some(4), None, Some(8), None]);
        let narrow = widths(&cols, &rows, 10);
        assert_eq!(narrow, vec![Some(4), None, Some(5), None]);
        assert_eq!(fit(Kind::Number, "+123,459", 5), OVERFLOW);
    }
}
