//! Line charts: drawn once, as SVG (plotters), and rendered to PNG from that
//! SVG (resvg), so the two always match. Text is laid out with the DejaVu
//! Sans font shipped in `assets/`, registered with plotters and loaded into
//! resvg's font database at run time: no system font or font library is
//! needed.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use resvg::{tiny_skia, usvg};

use super::FONT;
use crate::SimError;

const FAMILY: &str = "sans-serif";
const FONT_NAME: &str = "DejaVu Sans";
const SIZE: (u32, u32) = (960, 540);
/// The legend's column, right of the plot (never over the data).
const LEGEND_WIDTH: u32 = 230;

/// The colours of the strategies' lines: the Okabe–Ito palette (safe for
/// the common forms of colour blindness) without its yellow, which is too
/// pale on white, and with sky blue last: next to blue it reads as a second
/// blue, so the six colours a chart of up to six strategies uses are six
/// different hues (black among them). Reference lines (a server's
/// capacity) are grey, in no strategy's colour.
pub(crate) const COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(230, 159, 0),   // orange
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(0, 0, 0),       // black
    RGBColor(86, 180, 233),  // sky blue
];

/// The shading of an x span: grey at 15 %.
const SHADE: RGBAColor = RGBAColor(120, 120, 120, 0.15);

/// The colour of a reference line (a server's capacity, its workers).
pub(crate) const REFERENCE: RGBColor = RGBColor(140, 140, 140);

/// Dash patterns, in pixels: on, off, on, off... (empty: solid). The first
/// line, the baseline the others are read against, is solid.
const DASHES: [&[u32]; 7] = [
    &[],
    &[10, 5],
    &[2, 4],
    &[12, 4, 2, 4],
    &[6, 6],
    &[16, 4, 2, 4, 2, 4],
    &[20, 6],
];

/// The shape of a line's markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
    Cross,
    Plus,
}

const MARKERS: [Marker; 7] = [
    Marker::Circle,
    Marker::Square,
    Marker::TriangleUp,
    Marker::Diamond,
    Marker::TriangleDown,
    Marker::Cross,
    Marker::Plus,
];

/// How the line of the strategy at palette position `i` is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Style {
    pub(crate) color: RGBColor,
    pub(crate) dash: &'static [u32],
    pub(crate) marker: Marker,
}

/// The style of palette position `i`: the first seven differ in colour,
/// dash and marker alike; past seven the colours repeat, each with another
/// dash and marker, so no two of the first 49 lines look the same.
pub(crate) fn style(i: usize) -> Style {
    let n = COLORS.len();
    let round = i / n;
    Style {
        color: COLORS[i % n],
        dash: DASHES[(i + round) % n],
        marker: MARKERS[(i + 2 * round) % n],
    }
}

/// Pixels between two markers of one line; the lines of a chart place
/// theirs staggered across that spacing, so where lines coincide each one
/// still shows its own markers.
const MARKER_SPACING: f64 = 84.0;
/// The markers' half width, in pixels.
const MARKER_SIZE: i32 = 4;
/// Lines closer than this many pixels draw as one (their strokes are 2 px wide).
const COINCIDE_PX: f64 = 2.0;
/// The height and width of the plot's data area, in pixels, about (the
/// chart less its title, axis labels and legend): what the coincidence test
/// turns into a distance in data units.
const PLOT_PX: (f64, f64) = (430.0, 640.0);
/// Share of the span shown over which lines must coincide to be named in
/// the caption: lines that part only here and there (most of a chart's
/// lines share a baseline before an incident) are told apart by the chart
/// itself; lines that coincide nearly everywhere need saying.
const COINCIDE_SHARE: f64 = 0.9;

/// One line of a chart.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    /// A reference to read the strategies against (a server's capacity):
    /// grey and solid, without markers, and never counted in the palette.
    pub(crate) reference: bool,
}

/// A shaded span of x (an outage, a trigger), labelled in the legend, and
/// inside the plot too when the label fits in the span.
#[derive(Debug, Clone)]
pub(crate) struct Shade {
    pub(crate) from: f64,
    pub(crate) to: f64,
    pub(crate) label: String,
}

/// A chart: lines over a shared x axis, optionally a shaded and labelled x
/// span and a logarithmic y axis, and a caption for the page.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub(crate) title: String,
    /// What to look at, shown under the chart in `index.html` (followed by
    /// what [`coincidences`] finds).
    pub(crate) caption: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) lines: Vec<Line>,
    pub(crate) shade: Option<Shade>,
    pub(crate) log_y: bool,
    /// The y axis counts things: its ticks are whole numbers.
    pub(crate) integer_y: bool,
    /// Points right of this are left out (to zoom on the interesting part).
    pub(crate) x_max: Option<f64>,
    /// The palette position of the first strategy line; the others take the
    /// next ones. So a strategy keeps its colour, dash and marker in every
    /// chart of a section, even in one that leaves some strategies out.
    pub(crate) first_color: usize,
}

impl Chart {
    /// The strategy lines with their styles (reference lines left out).
    pub(crate) fn styled(&self) -> impl Iterator<Item = (&Line, Style)> {
        self.lines
            .iter()
            .filter(|l| !l.reference)
            .enumerate()
            .map(|(i, l)| (l, style(self.first_color + i)))
    }

    /// The caption, with a sentence naming the lines that coincide when
    /// some do.
    pub(crate) fn full_caption(&self) -> String {
        let groups = coincidences(self);
        if groups.is_empty() {
            return self.caption.clone();
        }
        let parts: Vec<String> = groups
            .iter()
            .map(|g| {
                format!(
                    "{} draw as one line over {:.0} % of the span shown",
                    and_list(&g.names),
                    (g.share * 100.0).floor()
                )
            })
            .collect();
        format!(
            "{} Lines that coincide hide one another: {}; each keeps its own dash pattern and \
             markers (staggered, so each shows where they coincide).",
            self.caption,
            parts.join("; ")
        )
    }
}

/// Lines that draw as one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Coincidence {
    /// The lines' names, in the chart's order.
    pub(crate) names: Vec<String>,
    /// The share of the x span shown over which all of them are within
    /// [`COINCIDE_PX`] of each other.
    pub(crate) share: f64,
}

/// The groups of strategy lines that coincide (all within about two pixels
/// of each other) over at least [`COINCIDE_SHARE`] of the x span shown,
/// computed from the points: each line joins the first group all of whose lines it coincides
/// with, pair by pair.
pub(crate) fn coincidences(chart: &Chart) -> Vec<Coincidence> {
    let (xs, ys) = ranges(chart);
    let to_y = |y: f64| {
        if chart.log_y {
            y.max(f64::MIN_POSITIVE).log10()
        } else {
            y
        }
    };
    let (lo, hi) = (to_y(ys.start), to_y(ys.end));
    let tolerance = (hi - lo) * COINCIDE_PX / PLOT_PX.0;
    let samples = PLOT_PX.1 as usize;
    let lines: Vec<(&Line, Vec<Option<f64>>)> = chart
        .lines
        .iter()
        .filter(|l| !l.reference)
        .map(|l| {
            let ys = (0..samples)
                .map(|k| {
                    let x = xs.start + (xs.end - xs.start) * (k as f64 + 0.5) / samples as f64;
                    interpolate(&l.points, x)
                        .filter(|y| y.is_finite() && !(chart.log_y && *y <= 0.0))
                        .map(to_y)
                })
                .collect();
            (l, ys)
        })
        .collect();
    let together = |members: &[usize]| {
        let hits = (0..samples)
            .filter(|&k| {
                let values: Option<Vec<f64>> = members.iter().map(|&m| lines[m].1[k]).collect();
                values.is_some_and(|v| {
                    let (min, max) = v
                        .iter()
                        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &y| {
                            (a.min(y), b.max(y))
                        });
                    max - min <= tolerance
                })
            })
            .count();
        hits as f64 / samples as f64
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for j in 0..lines.len() {
        let home = groups
            .iter()
            .position(|g| g.iter().all(|&m| together(&[m, j]) >= COINCIDE_SHARE));
        match home {
            Some(g) => groups[g].push(j),
            None => groups.push(vec![j]),
        }
    }
    groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .map(|g| Coincidence {
            share: together(&g),
            names: g.iter().map(|&m| lines[m].0.name.clone()).collect(),
        })
        .filter(|c| c.share >= COINCIDE_SHARE)
        .collect()
}

/// The line's y at `x`, linear between its points (the first segment that
/// spans `x`); `None` outside its points.
fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let first = points.first()?;
    if (first.0 - x).abs() < f64::EPSILON {
        return Some(first.1);
    }
    points.windows(2).find_map(|w| {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if x0 <= x && x <= x1 {
            Some(if x1 > x0 {
                y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            } else {
                y1
            })
        } else {
            None
        }
    })
}

/// "a", "a and b", "a, b and c", each name quoted.
fn and_list(names: &[String]) -> String {
    let quoted: Vec<String> = names
        .iter()
        .map(|n| format!("\u{201c}{n}\u{201d}"))
        .collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Registers the shipped font with plotters once (it measures text with it).
fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the shipped DejaVu Sans font did not load".to_owned())
        })
        .clone()
}

/// resvg's options, with only the shipped font in its database, standing in
/// for every generic family.
fn svg_options() -> &'static usvg::Options<'static> {
    static OPTIONS: OnceLock<usvg::Options<'static>> = OnceLock::new();
    OPTIONS.get_or_init(|| {
        let mut db = usvg::fontdb::Database::new();
        db.load_font_data(FONT.to_vec());
        db.set_sans_serif_family(FONT_NAME);
        db.set_serif_family(FONT_NAME);
        db.set_monospace_family(FONT_NAME);
        usvg::Options {
            font_family: FONT_NAME.to_owned(),
            fontdb: Arc::new(db),
            ..usvg::Options::default()
        }
    })
}

/// Draws `chart` as SVG text.
pub(crate) fn svg(chart: &Chart) -> Result<String, String> {
    register_font()?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        draw_on(&root, chart)?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(text)
}

/// Renders SVG text to PNG bytes with resvg.
pub(crate) fn png_from_svg(svg: &str) -> Result<Vec<u8>, String> {
    let tree = usvg::Tree::from_str(svg, svg_options()).map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| "the chart has no area".to_owned())?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| e.to_string())
}

/// Draws `chart` to `<dir>/<stem>.svg` and renders that to `<dir>/<stem>.png`;
/// returns both paths.
pub(crate) fn draw(chart: &Chart, dir: &Path, stem: &str) -> Result<[PathBuf; 2], SimError> {
    let svg_path = dir.join(format!("{stem}.svg"));
    let png_path = dir.join(format!("{stem}.png"));
    let plot_err = |path: &Path| {
        let path = path.to_path_buf();
        move |message: String| SimError::Plot { path, message }
    };
    let text = svg(chart).map_err(plot_err(&svg_path))?;
    let png = png_from_svg(&text).map_err(plot_err(&png_path))?;
    for (path, bytes) in [(&svg_path, text.as_bytes()), (&png_path, &png[..])] {
        std::fs::write(path, bytes).map_err(|source| SimError::Io {
            path: path.clone(),
            source,
        })?;
    }
    Ok([svg_path, png_path])
}

fn ranges(chart: &Chart) -> (Range<f64>, Range<f64>) {
    let x_max = chart.x_max.unwrap_or(f64::INFINITY);
    let points = chart
        .lines
        .iter()
        .flat_map(|l| l.points.iter())
        .filter(|p| p.0 <= x_max);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        if !(x.is_finite() && y.is_finite()) || (chart.log_y && y <= 0.0) {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if y0 > y1 {
        (y0, y1) = (if chart.log_y { 1.0 } else { 0.0 }, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if chart.log_y {
        (x0..x1, y0 / 1.5..(y1 * 1.5).max(y0 * 2.0))
    } else {
        // Head room for the shade's label above the highest line.
        let top = if y1 > 0.0 { y1 * 1.12 } else { 1.0 };
        let top = if chart.integer_y {
            top.ceil().max(1.0)
        } else {
            top
        };
        // A sliver below zero, so a line at zero shows above the axis.
        let bottom = y0.min(0.0);
        (x0..x1, bottom - (top - bottom) * 0.012..top)
    }
}

fn draw_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (xs, ys) = ranges(chart);
    let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    if chart.log_y {
        draw_lines(&plot, chart, xs, ys.log_scale())?;
    } else {
        draw_lines(&plot, chart, xs, ys)?;
    }
    draw_legend(&legend, chart)
}

/// A point in pixels, relative to the drawing area, as floats.
type Px = (f64, f64);

fn draw_lines<DB, Y>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    xs: Range<f64>,
    ys: Y,
) -> Result<(), String>
where
    DB: DrawingBackend,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut ctx = ChartBuilder::on(root)
        .caption(&chart.title, (FAMILY, 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(xs.clone(), ys)
        .map_err(|e| err(&e))?;
    let whole = |v: &f64| format!("{:.0}", v.round());
    let x_span = xs.end - xs.start;
    let x_ticks = move |v: &f64| tick(*v, x_span);
    // Log ticks are powers of ten: whole ones without decimals ("1", not "1.0").
    let log_ticks = |v: &f64| {
        if (v - v.round()).abs() < 1e-9 {
            format!("{v:.0}")
        } else {
            tick(*v, v.abs())
        }
    };
    let mut mesh = ctx.configure_mesh();
    mesh.x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(RGBColor(235, 235, 235));
    mesh.x_label_formatter(&x_ticks);
    if chart.integer_y {
        mesh.y_label_formatter(&whole);
    } else if chart.log_y {
        mesh.y_label_formatter(&log_ticks);
    }
    mesh.draw().map_err(|e| err(&e))?;
    // Data to pixels, relative to this drawing area.
    let base = root.get_base_pixel();
    let px = |x: f64, y: f64| -> Px {
        let (a, b) = ctx.backend_coord(&(x, y));
        (f64::from(a - base.0), f64::from(b - base.1))
    };
    let (lo, hi) = (ctx.y_range().start, ctx.y_range().end);
    if let Some(shade) = &chart.shade {
        let (a, b) = (shade.from.max(xs.start), shade.to.min(xs.end));
        let (top_left, bottom_right) = (px(a, hi), px(b, lo));
        root.draw(&Rectangle::new(
            [
                (to_i(top_left.0), to_i(top_left.1)),
                (to_i(bottom_right.0), to_i(bottom_right.1)),
            ],
            SHADE.filled(),
        ))
        .map_err(|e| err(&e))?;
        // The label, just inside the top left of the span, if it fits there
        // (the legend names the shading in any case).
        let font = (FAMILY, 14).into_font().color(&RGBColor(60, 60, 60));
        let (width, _) = root
            .estimate_text_size(&shade.label, &font)
            .map_err(|e| err(&e))?;
        let (left, right) = (px(a, hi).0, px(b, hi).0);
        if f64::from(width) + 8.0 <= right - left {
            let top = px(a, hi).1;
            root.draw(&Text::new(
                shade.label.clone(),
                (to_i(left + 4.0), to_i(top + 4.0)),
                font,
            ))
            .map_err(|e| err(&e))?;
        }
    }
    let visible = |&(x, y): &(f64, f64)| {
        x.is_finite() && y.is_finite() && x <= xs.end && !(chart.log_y && y <= 0.0)
    };
    let in_pixels = |line: &Line| -> Vec<Px> {
        line.points
            .iter()
            .copied()
            .filter(visible)
            .map(|(x, y)| px(x, y))
            .collect()
    };
    // References first, under everything; then the strategies in order, the
    // first (solid) at the bottom so it shows through the others' gaps; then
    // every marker, on top.
    for line in chart.lines.iter().filter(|l| l.reference) {
        stroke(root, &in_pixels(line), REFERENCE, 3, &[])?;
    }
    let styled: Vec<(Vec<Px>, Style)> = chart
        .styled()
        .map(|(line, style)| (in_pixels(line), style))
        .collect();
    for (points, style) in &styled {
        stroke(root, points, style.color, 2, style.dash)?;
    }
    let left = px(xs.start, hi).0;
    let count = styled.len().max(1) as f64;
    for (i, (points, style)) in styled.iter().enumerate() {
        let offset = MARKER_SPACING * (i as f64 + 0.5) / count;
        for at in marker_positions(points, left + offset, MARKER_SPACING) {
            mark(root, at, *style)?;
        }
    }
    Ok(())
}

fn to_i(v: f64) -> i32 {
    // Pixel coordinates of a 960 x 540 chart: far inside i32.
    #[allow(clippy::cast_possible_truncation)]
    let v = v.round().clamp(-1e6, 1e6) as i32;
    v
}

/// Draws the polyline `points` with the dash pattern `dash` (solid when
/// empty), continuing the pattern across the points.
fn stroke<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    points: &[Px],
    color: RGBColor,
    width: u32,
    dash: &[u32],
) -> Result<(), String> {
    let style = color.stroke_width(width);
    for piece in dashes(points, dash) {
        let path: Vec<(i32, i32)> = piece.iter().map(|&(x, y)| (to_i(x), to_i(y))).collect();
        area.draw(&PathElement::new(path, style))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The inked pieces of `points` under the pattern `dash` (on, off, ... in
/// pixels; the whole line when empty).
pub(crate) fn dashes(points: &[Px], dash: &[u32]) -> Vec<Vec<Px>> {
    if dash.is_empty() || dash.iter().all(|&d| d == 0) {
        return vec![points.to_vec()];
    }
    let mut pieces = Vec::new();
    let mut current: Vec<Px> = Vec::new();
    let (mut phase, mut left) = (0, f64::from(dash[0]));
    let on = |phase: usize| phase.is_multiple_of(2);
    for pair in points.windows(2) {
        let (mut from, to) = (pair[0], pair[1]);
        loop {
            if left <= 1e-9 {
                // A dash or gap that ended exactly at a point.
                if on(phase) && current.len() > 1 {
                    pieces.push(std::mem::take(&mut current));
                }
                current.clear();
                phase = (phase + 1) % dash.len();
                left = f64::from(dash[phase]);
                continue;
            }
            let length = (to.0 - from.0).hypot(to.1 - from.1);
            if on(phase) && current.is_empty() {
                current.push(from);
            }
            if length <= left {
                left -= length;
                if on(phase) {
                    current.push(to);
                }
                break;
            }
            let t = left / length;
            let cut = (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t);
            if on(phase) {
                current.push(cut);
                pieces.push(std::mem::take(&mut current));
            }
            from = cut;
            phase = (phase + 1) % dash.len();
            left = f64::from(dash[phase]);
        }
    }
    if current.len() > 1 {
        pieces.push(current);
    }
    pieces
}

/// Where a line's markers go: at x = `first`, `first + spacing`, ... within
/// the line's x extent, at the line's y there (the first segment that spans
/// that x).
pub(crate) fn marker_positions(points: &[Px], first: f64, spacing: f64) -> Vec<Px> {
    let (Some(start), Some(end)) = (points.first(), points.last()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut x = first;
    while x < start.0 {
        x += spacing;
    }
    let mut segment = 0;
    while x <= end.0 {
        while segment + 1 < points.len() && points[segment + 1].0 < x {
            segment += 1;
        }
        let (a, b) = (points[segment], points[(segment + 1).min(points.len() - 1)]);
        let y = if b.0 > a.0 {
            a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0)
        } else {
            b.1
        };
        out.push((x, y));
        x += spacing;
    }
    out
}

/// Draws one marker of `style` centred on `at`, with a white rim so it
/// stands out on the lines it sits on.
fn mark<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    at: Px,
    style: Style,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let (x, y) = (to_i(at.0), to_i(at.1));
    let shape = |r: i32| -> Vec<(i32, i32)> {
        match style.marker {
            Marker::Square => vec![
                (x - r, y - r),
                (x + r, y - r),
                (x + r, y + r),
                (x - r, y + r),
            ],
            Marker::TriangleUp => vec![(x, y - r - 1), (x + r + 1, y + r), (x - r - 1, y + r)],
            Marker::TriangleDown => vec![(x, y + r + 1), (x + r + 1, y - r), (x - r - 1, y - r)],
            Marker::Diamond => vec![
                (x, y - r - 1),
                (x + r + 1, y),
                (x, y + r + 1),
                (x - r - 1, y),
            ],
            Marker::Circle | Marker::Cross | Marker::Plus => Vec::new(),
        }
    };
    let r = MARKER_SIZE;
    match style.marker {
        Marker::Circle => {
            let size = u32::try_from(r).unwrap_or(4);
            area.draw(&Circle::new((x, y), size + 1, WHITE.filled()))
                .map_err(|e| err(&e))?;
            area.draw(&Circle::new((x, y), size, style.color.filled()))
                .map_err(|e| err(&e))?;
        }
        Marker::Cross | Marker::Plus => {
            let arms = if style.marker == Marker::Cross {
                [
                    ((x - r, y - r), (x + r, y + r)),
                    ((x - r, y + r), (x + r, y - r)),
                ]
            } else {
                [
                    ((x - r - 1, y), (x + r + 1, y)),
                    ((x, y - r - 1), (x, y + r + 1)),
                ]
            };
            for (color, width) in [(WHITE, 5), (style.color, 2)] {
                for (a, b) in arms {
                    area.draw(&PathElement::new(vec![a, b], color.stroke_width(width)))
                        .map_err(|e| err(&e))?;
                }
            }
        }
        _ => {
            area.draw(&Polygon::new(shape(r + 1), WHITE.filled()))
                .map_err(|e| err(&e))?;
            area.draw(&Polygon::new(shape(r), style.color.filled()))
                .map_err(|e| err(&e))?;
        }
    }
    Ok(())
}

/// A tick label with as many decimals as a scale of `span` needs: none
/// from 10 up, one from 1, two below (so "20", not "20.0"; "0.5"; "0.05").
fn tick(v: f64, span: f64) -> String {
    let decimals = if span >= 10.0 {
        0
    } else if span >= 1.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$}")
}

/// Splits `text` into lines no wider than `width` pixels (a word longer
/// than that gets a line of its own).
fn wrap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    font: &TextStyle,
    width: u32,
) -> Vec<String> {
    let fits = |t: &str| {
        area.estimate_text_size(t, font)
            .map_or(true, |(w, _)| w <= width)
    };
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(last) if fits(&format!("{last} {word}")) => {
                last.push(' ');
                last.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// The legend, in its own column right of the plot: each line's colour,
/// dash and marker, then the shading.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let font = (FAMILY, 14).into_font().color(&BLACK);
    let text_x = 50;
    let text_width = LEGEND_WIDTH - 56;
    let mut y = 70;
    let mut styles = chart.styled().map(|(_, s)| s);
    for line in &chart.lines {
        let sample = [(4.0, f64::from(y)), (42.0, f64::from(y))];
        if line.reference {
            stroke(area, &sample, REFERENCE, 3, &[])?;
        } else if let Some(style) = styles.next() {
            stroke(area, &sample, style.color, 2, style.dash)?;
            mark(area, (23.0, f64::from(y)), style)?;
        }
        let rows = wrap(area, &line.name, &font, text_width);
        for (k, row) in rows.iter().enumerate() {
            let dy = 17 * i32::try_from(k).unwrap_or(0);
            area.draw(&Text::new(row.clone(), (text_x, y - 8 + dy), font.clone()))
                .map_err(|e| err(&e))?;
        }
        y += 26 + 17 * (i32::try_from(rows.len()).unwrap_or(1) - 1);
    }
    if let Some(shade) = &chart.shade {
        y += 6;
        area.draw(&Rectangle::new([(4, y - 9), (42, y + 9)], SHADE.filled()))
            .map_err(|e| err(&e))?;
        for (k, row) in wrap(area, &format!("shaded: {}", shade.label), &font, text_width)
            .iter()
            .enumerate()
        {
            let dy = 17 * i32::try_from(k).unwrap_or(0);
            area.draw(&Text::new(row.clone(), (text_x, y - 8 + dy), font.clone()))
                .map_err(|e| err(&e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> Chart {
        Chart {
            title: "jitter gRPC 10 ms".to_owned(),
            caption: String::new(),
            x_label: "time (s)".to_owned(),
            y_label: "attempts".to_owned(),
            lines: vec![Line {
                reference: false,
                name: "full jitter".to_owned(),
                points: vec![(0.0, 0.0), (1.0, 1000.0), (2.0, 500.0)],
            }],
            shade: Some(Shade {
                from: 0.5,
                to: 1.0,
                label: "outage".to_owned(),
            }),
            log_y: false,
            integer_y: true,
            x_max: None,
            first_color: 0,
        }
    }

    /// A chart of `lines` named a, b, c... over 0..=100 s.
    fn lines_chart(lines: Vec<Vec<(f64, f64)>>) -> Chart {
        Chart {
            title: "t".to_owned(),
            caption: "Look.".to_owned(),
            lines: lines
                .into_iter()
                .enumerate()
                .map(|(i, points)| Line {
                    reference: false,
                    name: char::from(b'a' + u8::try_from(i).unwrap()).to_string(),
                    points,
                })
                .collect(),
            shade: None,
            ..chart()
        }
    }

    /// A line of `y(x)` sampled once a second over 0..=100 s.
    fn sampled(y: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
        (0..=100).map(|i| (f64::from(i), y(f64::from(i)))).collect()
    }

    /// The hue of `c` in degrees, or `None` for a grey.
    fn hue(c: RGBColor) -> Option<f64> {
        let (r, g, b) = (f64::from(c.0), f64::from(c.1), f64::from(c.2));
        let (max, min) = (r.max(g).max(b), r.min(g).min(b));
        if max - min < 1.0 {
            return None;
        }
        let d = max - min;
        let h = if (max - r).abs() < f64::EPSILON {
            ((g - b) / d).rem_euclid(6.0)
        } else if (max - g).abs() < f64::EPSILON {
            (b - r) / d + 2.0
        } else {
            (r - g) / d + 4.0
        };
        Some(h * 60.0)
    }

    #[test]
    fn the_first_seven_lines_differ_in_colour_dash_and_marker_and_six_in_hue() {
        let styles: Vec<Style> = (0..7).map(style).collect();
        for (i, a) in styles.iter().enumerate() {
            for b in &styles[i + 1..] {
                assert_ne!(a.color, b.color);
                assert_ne!(a.dash, b.dash);
                assert_ne!(a.marker, b.marker);
            }
        }
        // No two of the six colours a chart of six strategies uses are
        // shades of one hue (blue and sky blue were); black is the one grey.
        let six: Vec<Option<f64>> = styles[..6].iter().map(|s| hue(s.color)).collect();
        assert_eq!(six.iter().filter(|h| h.is_none()).count(), 1);
        let hues: Vec<f64> = six.into_iter().flatten().collect();
        for (i, a) in hues.iter().enumerate() {
            for b in &hues[i + 1..] {
                let apart = (a - b).abs().min(360.0 - (a - b).abs());
                assert!(apart >= 10.0, "hues {a:.0} and {b:.0}");
            }
        }
        assert!(hue(REFERENCE).is_none() && !COLORS.contains(&REFERENCE));
        // Past seven the colours come round again, with another dash and marker.
        for i in 0..49 {
            for j in i + 1..49 {
                assert_ne!(style(i), style(j), "{i} and {j}");
            }
        }
    }

    #[test]
    fn each_line_is_drawn_in_its_own_colour_with_its_markers_even_where_all_coincide() {
        let same = sampled(|x| 50.0 + (x / 7.0).sin() * 20.0);
        let chart = lines_chart(vec![same.clone(); 6]);
        let text = svg(&chart).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let colour = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        for (i, s) in (0..6).map(|i| (i, style(i))) {
            let hex = colour(s.color);
            let strokes = doc
                .descendants()
                .filter(|n| n.has_tag_name("polyline"))
                .filter(|n| {
                    n.attribute("stroke")
                        .is_some_and(|v| v.eq_ignore_ascii_case(&hex))
                })
                .count();
            // Dashed lines are drawn as many pieces; the solid first as one
            // (and each legend sample as one more).
            assert!(
                strokes >= if i == 0 { 2 } else { 20 },
                "line {i}: {strokes}"
            );
            let markers = doc
                .descendants()
                .filter(|n| {
                    n.has_tag_name("circle")
                        || n.has_tag_name("polygon")
                        || n.has_tag_name("polyline")
                })
                .filter(|n| {
                    n.attribute("fill")
                        .is_some_and(|v| v.eq_ignore_ascii_case(&hex))
                })
                .count();
            if !matches!(s.marker, Marker::Cross | Marker::Plus) {
                assert!(markers >= 5, "line {i} has {markers} markers");
            }
        }
        // The markers of coincident lines are staggered: none share a place.
        let points: Vec<Px> = same.iter().map(|&(x, y)| (x * 6.0, y)).collect();
        let mut places: Vec<(i32, i32)> = (0..6)
            .flat_map(|i| {
                marker_positions(
                    &points,
                    MARKER_SPACING * (f64::from(i) + 0.5) / 6.0,
                    MARKER_SPACING,
                )
            })
            .map(|(x, y)| (to_i(x), to_i(y)))
            .collect();
        let all = places.len();
        places.sort_unstable();
        places.dedup();
        assert_eq!(places.len(), all);
    }

    #[test]
    fn coinciding_lines_are_found_from_the_data_and_said_in_the_caption() {
        let base = sampled(|x| 100.0 + x);
        let apart = sampled(|x| 400.0 - x);
        // Equal to the base for the first 60 % only.
        let partly = sampled(|x| if x <= 60.0 { 100.0 + x } else { 300.0 });
        let chart = lines_chart(vec![
            base.clone(),
            apart,
            base.clone(),
            partly,
            base.clone(),
        ]);
        let found = coincidences(&chart);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].names, ["a", "c", "e"]);
        assert!((found[0].share - 1.0).abs() < 1e-9);
        let caption = chart.full_caption();
        assert!(
            caption.starts_with("Look. Lines that coincide hide one another"),
            "{caption}"
        );
        assert!(
            caption.contains("\u{201c}a\u{201d}, \u{201c}c\u{201d} and \u{201c}e\u{201d} draw as one line over 100 %"),
            "{caption}"
        );
        // Lines a pixel apart coincide; lines ten pixels apart do not
        // (the y span is about 330, over about 430 pixels).
        let near = lines_chart(vec![
            base.clone(),
            sampled(|x| 100.8 + x),
            sampled(|x| 108.0 + x),
        ]);
        let found = coincidences(&near);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].names, ["a", "b"]);
        // Nothing coincides: the caption is the chart's own; a reference
        // line under a strategy is not counted.
        let mut alone = lines_chart(vec![sampled(|x| x), sampled(|x| 100.0 - x)]);
        assert_eq!(alone.full_caption(), "Look.");
        alone.lines.push(Line {
            reference: true,
            name: "capacity".to_owned(),
            points: sampled(|x| x),
        });
        assert!(coincidences(&alone).is_empty());
    }

    #[test]
    fn a_shade_label_too_wide_for_its_span_goes_to_the_legend_only() {
        let label = "outage: every connection refused";
        let mut narrow = chart();
        narrow.shade = Some(Shade {
            from: 0.0,
            to: 0.02,
            label: label.to_owned(),
        });
        let texts_narrow = texts(&svg(&narrow).unwrap());
        assert!(!texts_narrow.iter().any(|t| t == label), "{texts_narrow:?}");
        assert!(
            texts_narrow.iter().any(|t| t.starts_with("shaded: outage")),
            "{texts_narrow:?}"
        );
        let mut wide = narrow.clone();
        wide.shade = Some(Shade {
            from: 0.0,
            to: 1.5,
            label: label.to_owned(),
        });
        let texts_wide = texts(&svg(&wide).unwrap());
        assert!(texts_wide.iter().any(|t| t == label), "{texts_wide:?}");
    }

    #[test]
    fn dashes_follow_the_pattern_across_the_points() {
        // 100 px along two segments, dashes of 10 on, 5 off.
        let pieces = dashes(&[(0.0, 0.0), (35.0, 0.0), (35.0, 65.0)], &[10, 5]);
        let length = |p: &[Px]| {
            p.windows(2)
                .map(|w| (w[1].0 - w[0].0).hypot(w[1].1 - w[0].1))
                .sum::<f64>()
        };
        assert_eq!(pieces.len(), 7);
        let inked: f64 = pieces.iter().map(|p| length(p)).sum();
        assert!((inked - 70.0).abs() < 1e-9, "{inked}");
        // The dash from 30 to 40 px turns the corner at 35: it holds it.
        assert_eq!(pieces[2], vec![(30.0, 0.0), (35.0, 0.0), (35.0, 5.0)]);
        assert_eq!(pieces[3], vec![(35.0, 10.0), (35.0, 20.0)]);
        // A dash that ends on a point ends there, without a stray point.
        let corner = dashes(&[(0.0, 0.0), (10.0, 0.0), (10.0, 20.0)], &[10, 5]);
        assert_eq!(corner[0], vec![(0.0, 0.0), (10.0, 0.0)]);
        assert_eq!(corner[1], vec![(10.0, 5.0), (10.0, 15.0)]);
        // An empty pattern is the whole line.
        assert_eq!(dashes(&[(0.0, 0.0), (5.0, 5.0)], &[]).len(), 1);
    }

    /// Every `<text>` element's content, trimmed.
    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or_default().trim().to_owned())
            .collect()
    }

    #[test]
    fn count_axes_have_whole_ticks_and_text_stays_whole_words() {
        let texts = texts(&svg(&chart()).unwrap());
        for count in ["200.0", "1000.0"] {
            assert!(!texts.iter().any(|t| t == count), "{texts:?}");
        }
        assert!(texts.iter().any(|t| t == "1000" || t == "800"), "{texts:?}");
        // Text is one element per label, never split into letters.
        for whole in ["jitter gRPC 10 ms", "full jitter", "outage", "time (s)"] {
            assert!(texts.iter().any(|t| t == whole), "{whole}: {texts:?}");
        }
    }

    #[test]
    fn the_files_written_are_one_drawing_in_two_formats() {
        let dir = std::env::temp_dir().join(format!("steadfast-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let [svg_path, png_path] = draw(&chart(), &dir, "one").unwrap();
        let svg_text = std::fs::read_to_string(&svg_path).unwrap();
        // The PNG on disk is exactly the SVG on disk, rendered.
        assert_eq!(
            std::fs::read(&png_path).unwrap(),
            png_from_svg(&svg_text).unwrap()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_png_is_the_svg_rendered_with_the_shipped_font() {
        let text = svg(&chart()).unwrap();
        let png = png_from_svg(&text).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), SIZE);
        // The title's text was rendered: dark pixels in the caption band
        // (no font would leave it blank).
        let row_bytes = info.line_size;
        let dark = (5..35)
            .flat_map(|y| buf[y * row_bytes..(y + 1) * row_bytes].chunks(4))
            .filter(|px| px[0] < 100 && px[1] < 100 && px[2] < 100)
            .count();
        assert!(dark > 50, "the title was not rendered ({dark} dark pixels)");
    }
}
