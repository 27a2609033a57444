//! The report's plots, drawn with `plotters`: each plot is drawn once per backend, as
//! an SVG string (inlined in the HTML page) and as a PNG file beside it.
//!
//! Three kinds:
//! - [`Percentiles`]: latency by percentile, HdrHistogram's way: the x axis is
//!   `1 / (1 − quantile)` on a log scale, labelled 0%, 90%, 99%, 99.9%…, so the tail
//!   gets as much room as the median;
//! - [`Lines`]: a rate against a parameter, one line per design (sweeps), each in a
//!   translucent band of its 95 % intervals;
//! - [`Timeline`]: one row per host, bars over simulated time (believed holds, the
//!   server's record of the key, faults), the violation marked.
//!
//! Text needs a font to be measured (for layout, in both backends) and drawn (in the
//! PNG). [`init_font`] loads a TrueType font from the usual system places, or from
//! `LOCKSIM_FONT`, and says which package to install when there is none.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

/// Where a sans-serif TrueType font usually is (Debian's fonts-dejavu-core first).
const FONT_PATHS: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

/// The bytes of the font [`init_font`] loaded (the diagram measures its text with it).
static FONT_BYTES: std::sync::OnceLock<&'static [u8]> = std::sync::OnceLock::new();

/// The font the plots draw with, once [`init_font`] found one.
pub fn font_bytes() -> Option<&'static [u8]> {
    init_font().ok()?;
    FONT_BYTES.get().copied()
}

/// Loads the plots' font once (`LOCKSIM_FONT`, else the first of `FONT_PATHS` that
/// exists); the error says what to install.
pub fn init_font() -> Result<(), String> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let from_env = std::env::var_os("LOCKSIM_FONT").map(std::path::PathBuf::from);
        let candidates: Vec<std::path::PathBuf> = from_env
            .clone()
            .into_iter()
            .chain(FONT_PATHS.iter().map(std::path::PathBuf::from))
            .collect();
        for path in &candidates {
            let Ok(bytes) = std::fs::read(path) else {
                if from_env.as_ref() == Some(path) {
                    return Err(format!("cannot read LOCKSIM_FONT={}", path.display()));
                }
                continue;
            };
            // The font lives as long as the process: plotters keeps a reference.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            let _ = FONT_BYTES.set(bytes);
            for style in [FontStyle::Normal, FontStyle::Bold] {
                plotters::style::register_font("sans-serif", style, bytes)
                    .map_err(|_| format!("{} is not a TrueType font", path.display()))?;
            }
            return Ok(());
        }
        Err(format!(
            "no TrueType font for the plots' text: install Debian's fonts-dejavu-core \
             (apt-get install fonts-dejavu-core) or set LOCKSIM_FONT=/path/to/font.ttf \
             (looked in {})",
            FONT_PATHS.join(", ")
        ))
    })
    .clone()
}

/// Something drawable on any plotters backend.
pub trait Draw {
    /// Pixel size.
    fn size(&self) -> (u32, u32);
    /// Draws on `root`.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// Draws `plot` as an SVG string and, if `png` is given, as a PNG file there.
pub fn render(plot: &impl Draw, png: Option<&Path>) -> Result<String, String> {
    init_font()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, plot.size()).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        plot.draw(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    if let Some(path) = png {
        let (width, height) = plot.size();
        let mut rgb = vec![0u8; width as usize * height as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| e.to_string())?;
            plot.draw(&root)?;
            root.present().map_err(|e| e.to_string())?;
        }
        write_png(path, width, height, &rgb)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(svg)
}

/// Writes 8-bit RGB pixels as a PNG file. (plotters' own PNG writer goes through the
/// `image` crate, which brings JPEG and other codecs into every build: about 15 s of
/// a clean build's CPU for one format.)
fn write_png(path: &Path, width: u32, height: u32, rgb: &[u8]) -> Result<(), String> {
    let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(rgb).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())
}

/// Distinct colours for lines and hosts (Tableau 10 and a few more), in order.
pub const COLORS: [RGBColor; 12] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 128),
    RGBColor(128, 128, 0),
];

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Colour.
    pub color: RGBColor,
    /// Points, x ascending.
    pub points: Vec<(f64, f64)>,
    /// An uncertainty band around the line, as (x, low, high), x ascending; drawn
    /// translucent under it by [`Lines`] (empty: none).
    pub band: Vec<(f64, f64, f64)>,
}

/// The smallest x, the largest x and the largest y of every point (infinities if
/// there are none).
fn bounds(series: &[Series]) -> (f64, f64, f64) {
    series.iter().flat_map(|s| s.points.iter()).fold(
        (f64::INFINITY, f64::NEG_INFINITY, f64::NEG_INFINITY),
        |(lo, hi, top), (x, y)| (lo.min(*x), hi.max(*x), top.max(*y)),
    )
}

/// Latency by percentile (x: `1 / (1 − q)`, log scale).
#[derive(Debug, Clone)]
pub struct Percentiles {
    /// The caption.
    pub title: String,
    /// One series per outcome.
    pub series: Vec<Series>,
}

/// The x of quantile `q` on a percentile plot; the last point (q = 1) is put one
/// decade past the one before it, where HdrHistogram's plotter puts "max".
pub fn percentile_x(q: f64) -> f64 {
    if q >= 1.0 {
        f64::INFINITY
    } else {
        1.0 / (1.0 - q)
    }
}

/// The percentile curve of `h` (microseconds) in milliseconds.
pub fn percentile_points(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for v in h.iter_quantiles(2) {
        let x = percentile_x(v.quantile_iterated_to());
        let y = h.highest_equivalent(v.value_iterated_to()) as f64 / 1_000.0;
        let x = if x.is_finite() {
            x
        } else {
            pts.last().map_or(10.0, |(px, _)| px * 10.0)
        };
        if pts.last().is_some_and(|(px, _)| *px >= x) {
            continue;
        }
        pts.push((x, y));
    }
    pts
}

fn percent_label(x: &f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    if p < 0.5 {
        "0%".into()
    } else {
        let s = format!("{p:.4}");
        format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

impl Draw for Percentiles {
    fn size(&self) -> (u32, u32) {
        (640, 360)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (_, max_x, max_y) = bounds(&self.series);
        let (max_x, max_y) = (max_x.max(100.0), max_y.max(1.0));
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d((1.0..max_x * 1.2).log_scale(), 0.0..max_y * 1.08)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("percentile (log scale of 1 / (1 − quantile))")
            .y_desc("acquire latency, simulated ms")
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_label_formatter(&percent_label)
            .draw()
            .map_err(err)?;
        for s in &self.series {
            let color = s.color;
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        if !self.series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }
        Ok(())
    }
}

/// A rate (0..1) against a parameter, one line per design.
#[derive(Debug, Clone)]
pub struct Lines {
    /// The caption.
    pub title: String,
    /// The x axis's description.
    pub x_desc: String,
    /// The y axis's description.
    pub y_desc: String,
    /// One series per design.
    pub series: Vec<Series>,
}

impl Draw for Lines {
    fn size(&self) -> (u32, u32) {
        (720, 400)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (min_x, max_x, _) = bounds(&self.series);
        let (min_x, max_x) = if min_x.is_finite() && max_x > min_x {
            (min_x, max_x)
        } else {
            (0.0, 1.0)
        };
        let pad = (max_x - min_x) * 0.03;
        // Room on the right for the legend.
        let (plot_area, legend_area) = root.split_horizontally(self.size().0 - 190);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(min_x - pad..max_x + pad, -0.02..1.02)
            .map_err(err)?;
        let whole = self
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .all(|p| p.0.fract() == 0.0);
        let x_label = |x: &f64| {
            if whole {
                format!("{x:.0}")
            } else {
                format!("{x:.2}")
            }
        };
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .x_label_formatter(&x_label)
            .y_desc(&self.y_desc)
            .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
            .draw()
            .map_err(err)?;
        // Every band first, so no band hides a line.
        for s in &self.series {
            if s.band.len() < 2 {
                continue;
            }
            let outline: Vec<(f64, f64)> = s
                .band
                .iter()
                .map(|(x, _, hi)| (*x, *hi))
                .chain(s.band.iter().rev().map(|(x, lo, _)| (*x, *lo)))
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    s.color.mix(0.12).filled(),
                )))
                .map_err(err)?;
        }
        for s in &self.series {
            // A single point's interval as a whisker.
            if let [(x, lo, hi)] = s.band[..] {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x, lo), (x, hi)],
                        s.color.mix(0.4).stroke_width(2),
                    )))
                    .map_err(err)?;
            }
            let color = s.color;
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(err)?;
            chart
                .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(err)?;
        }
        for (i, s) in self.series.iter().enumerate() {
            let y = 40 + 18 * i as i32;
            legend_area
                .draw(&PathElement::new(
                    vec![(4, y), (24, y)],
                    s.color.stroke_width(3),
                ))
                .map_err(err)?;
            legend_area
                .draw(&Text::new(
                    s.label.clone(),
                    (30, y - 7),
                    ("sans-serif", 13).into_font(),
                ))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// A bar on a timeline row.
#[derive(Debug, Clone)]
pub struct Bar {
    /// The row.
    pub row: usize,
    /// Start, simulated ms.
    pub from_ms: f64,
    /// End, simulated ms.
    pub to_ms: f64,
    /// Fill colour.
    pub color: RGBColor,
    /// Opacity (0..1).
    pub alpha: f64,
    /// A short label drawn on the bar (empty: none).
    pub label: String,
}

/// Rows of bars over simulated time, with marked instants.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// The caption.
    pub title: String,
    /// Row names, top first.
    pub rows: Vec<String>,
    /// Shown window, simulated ms.
    pub from_ms: f64,
    /// See `from_ms`.
    pub to_ms: f64,
    /// Bars, drawn in order (later on top).
    pub bars: Vec<Bar>,
    /// Vertical marks across every row: time, colour, label.
    pub marks: Vec<(f64, RGBColor, String)>,
}

impl Draw for Timeline {
    fn size(&self) -> (u32, u32) {
        (900, 80 + 34 * self.rows.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let n = self.rows.len().max(1) as u32;
        let to = if self.to_ms > self.from_ms {
            self.to_ms
        } else {
            self.from_ms + 1.0
        };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(170)
            // An integer range is inclusive in plotters: 0..n-1 is n segments.
            .build_cartesian_2d(self.from_ms..to, (0u32..n - 1).into_segmented())
            .map_err(err)?;
        let rows = self.rows.clone();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_desc("simulated time, ms")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_labels(n as usize)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => {
                    rows.get((n - 1 - i) as usize).cloned().unwrap_or_default()
                }
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        // Row 0 is drawn at the top.
        let seg = |row: usize, top: bool| SegmentValue::Exact(n - row as u32 - u32::from(!top));
        for b in &self.bars {
            let style = b.color.mix(b.alpha).filled();
            let (from, to_) = (b.from_ms.max(self.from_ms), b.to_ms.min(to));
            if to_ <= from {
                continue;
            }
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(from, seg(b.row, true)), (to_, seg(b.row, false))],
                    style,
                )))
                .map_err(err)?;
            // A label only where the bar has room for it.
            if !b.label.is_empty()
                && (to_ - from) / (to - self.from_ms) > 0.012 * b.label.len() as f64
            {
                chart
                    .draw_series(std::iter::once(Text::new(
                        b.label.clone(),
                        (from, seg(b.row, true)),
                        ("sans-serif", 11).into_font().color(&BLACK),
                    )))
                    .map_err(err)?;
            }
        }
        for (at, color, label) in &self.marks {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(*at, SegmentValue::Exact(0)), (*at, SegmentValue::Exact(n))],
                    color.stroke_width(2),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (*at, SegmentValue::Exact(n)),
                    ("sans-serif", 12).into_font().color(color),
                )))
                .map_err(err)?;
        }
        Ok(())
    }
}
