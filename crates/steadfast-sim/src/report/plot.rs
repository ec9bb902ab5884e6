//! Line charts, drawn twice: SVG (text as text) and PNG (text rasterised with
//! the DejaVu Sans font shipped in `assets/`, registered with plotters at run
//! time so no system font library is needed).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use crate::SimError;

/// DejaVu Sans (Bitstream Vera license; see `assets/LICENSE-DejaVu.txt`).
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
const SIZE: (u32, u32) = (960, 540);

const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// One line of a chart.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// A chart: lines over a shared x axis, optionally a shaded x span (an
/// incident) and a logarithmic y axis.
#[derive(Debug, Clone)]
pub(crate) struct Chart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) lines: Vec<Line>,
    pub(crate) shade: Option<(f64, f64)>,
    pub(crate) log_y: bool,
    /// Points right of this are left out (to zoom on the interesting part).
    pub(crate) x_max: Option<f64>,
}

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the shipped DejaVu Sans font did not load".to_owned())
        })
        .clone()
}

/// Draws `chart` to `<dir>/<stem>.svg` and `<dir>/<stem>.png`; returns both paths.
pub(crate) fn draw(chart: &Chart, dir: &Path, stem: &str) -> Result<[PathBuf; 2], SimError> {
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    let plot_err = |path: &Path| {
        let path = path.to_path_buf();
        move |message: String| SimError::Plot { path, message }
    };
    register_font().map_err(plot_err(&png))?;
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        draw_on(&root, chart).map_err(plot_err(&svg))?;
        root.present().map_err(|e| plot_err(&svg)(e.to_string()))?;
    }
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        draw_on(&root, chart).map_err(plot_err(&png))?;
        root.present().map_err(|e| plot_err(&png)(e.to_string()))?;
    }
    Ok([svg, png])
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
        let top = if y1 > 0.0 { y1 * 1.08 } else { 1.0 };
        (x0..x1, y0.min(0.0)..top)
    }
}

fn draw_on<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (xs, ys) = ranges(chart);
    if chart.log_y {
        draw_lines(root, chart, xs, ys.log_scale())
    } else {
        draw_lines(root, chart, xs, ys)
    }
}

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
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| err(&e))?;
    if let Some((a, b)) = chart.shade {
        let (lo, hi) = (ctx.y_range().start, ctx.y_range().end);
        ctx.draw_series(std::iter::once(Rectangle::new(
            [(a.max(xs.start), lo), (b.min(xs.end), hi)],
            RGBColor(255, 200, 200).mix(0.35).filled(),
        )))
        .map_err(|e| err(&e))?;
    }
    for (i, line) in chart.lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<(f64, f64)> = line
            .points
            .iter()
            .copied()
            .filter(|&(x, y)| {
                x.is_finite() && y.is_finite() && x <= xs.end && !(chart.log_y && y <= 0.0)
            })
            .collect();
        ctx.draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(line.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(3))
            });
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}
