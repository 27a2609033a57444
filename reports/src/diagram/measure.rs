//! How wide a label is: measured with the font the plots use ([`crate::plot::init_font`]:
//! DejaVu Sans on Debian), so the layout can keep every label clear of every other.
//! The SVG asks for that font first (`FONT_FAMILY`); a viewer without it falls back to a
//! narrower sans-serif (Verdana, Arial, Liberation Sans are all narrower than DejaVu
//! Sans), so boxes measured here still hold the text drawn there. Kerning is ignored
//! (it only narrows text). Without any font, each character counts as 0.7 em.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef};

/// The SVG's `font-family`: the measured font first.
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";

/// The labels' font size, in px.
pub const SIZE: f64 = 11.0;

/// Above the baseline, in em (DejaVu Sans's ascent is 0.93 em, rounded up).
const ASCENT: f64 = 0.95;
/// Below the baseline, in em (DejaVu Sans's descent is 0.24 em, rounded up).
const DESCENT: f64 = 0.25;
/// How much wider bold text is than regular, at most (DejaVu Sans Bold: ~1.1).
const BOLD: f64 = 1.15;

fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(crate::plot::font_bytes()?).ok())
        .as_ref()
}

/// The advance width of `text` at `size` px (bold: wider by `BOLD`).
pub fn width(text: &str, size: f64, bold: bool) -> f64 {
    let em = match font() {
        Some(f) => {
            let upem = f64::from(f.units_per_em().unwrap_or(2048.0));
            text.chars()
                .map(|c| {
                    let g = f.glyph_id(c);
                    // A glyph the font lacks comes from some other font: count an em.
                    if g.0 == 0 {
                        1.0
                    } else {
                        f64::from(f.h_advance_unscaled(g)) / upem
                    }
                })
                .sum::<f64>()
        }
        None => text.chars().count() as f64 * 0.7,
    };
    em * size * if bold { BOLD } else { 1.0 }
}

/// The height of one line of labels, baseline to baseline.
pub fn line_height(size: f64) -> f64 {
    (ASCENT + DESCENT) * size + 1.0
}

/// A text's box on the page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextBox {
    /// Left.
    pub x0: f64,
    /// Top.
    pub y0: f64,
    /// Right.
    pub x1: f64,
    /// Bottom.
    pub y1: f64,
}

impl TextBox {
    /// The box of `text` drawn at `x`, baseline `y`, with SVG's `text-anchor`
    /// (`start`, `middle` or `end`).
    pub fn of(x: f64, y: f64, anchor: &str, text: &str, size: f64, bold: bool) -> TextBox {
        let w = width(text, size, bold);
        let x0 = match anchor {
            "end" => x - w,
            "middle" => x - w / 2.0,
            _ => x,
        };
        TextBox {
            x0,
            y0: y - ASCENT * size,
            x1: x0 + w,
            y1: y + DESCENT * size,
        }
    }

    /// A box from its corners.
    pub fn rect(x0: f64, y0: f64, x1: f64, y1: f64) -> TextBox {
        TextBox { x0, y0, x1, y1 }
    }

    /// Moved down by `dy`.
    pub fn down(self, dy: f64) -> TextBox {
        TextBox {
            y0: self.y0 + dy,
            y1: self.y1 + dy,
            ..self
        }
    }

    /// Whether the two boxes share any area (touching edges do not count).
    pub fn intersects(&self, o: &TextBox) -> bool {
        const EPS: f64 = 0.01;
        self.x0 < o.x1 - EPS && o.x0 < self.x1 - EPS && self.y0 < o.y1 - EPS && o.y0 < self.y1 - EPS
    }
}

/// `text` in at most `lines` lines no wider than `max_w`: broken at spaces (or inside a
/// word longer than a line), the last line cut with `…` if the rest does not fit.
/// Returns the lines and whether anything was cut.
pub fn fit(text: &str, max_w: f64, lines: usize, size: f64) -> (Vec<String>, bool) {
    let fits = |s: &str| width(s, size, false) <= max_w;
    let mut out: Vec<String> = Vec::new();
    let mut rest: &str = text.trim();
    while !rest.is_empty() {
        if out.len() + 1 == lines.max(1) || fits(rest) {
            if fits(rest) {
                out.push(rest.to_string());
                return (out, false);
            }
            // The last line: as much as fits, then `…`.
            let mut cut = String::new();
            for c in rest.chars() {
                cut.push(c);
                if !fits(&format!("{cut}…")) {
                    cut.pop();
                    break;
                }
            }
            out.push(format!("{}…", cut.trim_end()));
            return (out, true);
        }
        // The longest prefix that fits, preferring to break after a space.
        let mut end = 0;
        let mut last_space = None;
        for (i, c) in rest.char_indices() {
            let next = i + c.len_utf8();
            if !fits(&rest[..next]) {
                break;
            }
            end = next;
            if c == ' ' {
                last_space = Some(next);
            }
        }
        let brk = match last_space {
            Some(s) if end < rest.len() => s,
            _ => end.max(rest.chars().next().map_or(1, char::len_utf8)),
        };
        out.push(rest[..brk].trim_end().to_string());
        rest = rest[brk..].trim_start();
    }
    (out, false)
}
