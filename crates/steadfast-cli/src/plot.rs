//! `steadfast schedule --plot`: the delays of a schedule as an SVG or PNG
//! chart, drawn with plotters and the DejaVu Sans font the simulator ships
//! (no system font library is needed).

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::table::{EnvelopeRow, Row};

/// The font the simulator ships (DejaVu Sans, its license beside it in
/// steadfast-sim's package), so that no system font library is needed.
static FONT_BYTES: &[u8] = steadfast_sim::report::FONT;

/// What to draw.
#[derive(Debug, Clone, Copy)]
pub enum Series<'a> {
    /// The delays of one seeded run.
    Single(&'a [Row]),
    /// The p5/p50/p95 envelope over many seeds.
    Envelope(&'a [EnvelopeRow]),
}

fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, FONT_BYTES)
                .map_err(|_| "the shipped font could not be loaded".to_owned())
        })
        .clone()
}

/// Checks, before anything is computed, that `path` can be written: opens
/// it for writing, creating it if it is not there (an existing file is not
/// touched until the chart is drawn). Returns whether it was created, so
/// that a chart that then fails to draw can take it away again.
///
/// # Errors
/// A message naming the file when it cannot be opened for writing (its
/// folder is missing, it is a folder, permission is denied...).
pub fn prepare(path: &Path) -> Result<bool, String> {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map(|_| !existed)
        .map_err(|e| format!("--plot: cannot write {}: {e}", path.display()))
}

/// Draws `series` into `path`: an SVG when its name ends in `.svg`, a PNG
/// otherwise (the command line accepts only these two).
///
/// # Errors
/// A message when the font cannot be loaded or the file cannot be written.
pub fn plot(path: &Path, title: &str, series: Series<'_>) -> Result<(), String> {
    register_font()?;
    let svg = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    let size = (900, 540);
    let fail = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    if svg {
        let area = SVGBackend::new(path, size).into_drawing_area();
        draw(&area, title, series).map_err(|e| fail(&e))
    } else {
        let area = BitMapBackend::new(path, size).into_drawing_area();
        draw(&area, title, series).map_err(|e| fail(&e))
    }
}

fn secs(d: std::time::Duration) -> f64 {
    d.as_secs_f64()
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    series: Series<'_>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (last_attempt, top) = match series {
        Series::Single(rows) => (
            rows.last().map_or(2, |r| r.attempt),
            rows.iter().map(|r| secs(r.delay)).fold(0.0, f64::max),
        ),
        Series::Envelope(rows) => (
            rows.last().map_or(2, |r| r.attempt),
            rows.iter().map(|r| secs(r.p95)).fold(0.0, f64::max),
        ),
    };
    let top = if top > 0.0 { top * 1.1 } else { 0.001 };
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(1.5f64..f64::from(last_attempt) + 0.5, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("attempt")
        .y_desc("delay before the attempt (s)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    let blue = RGBColor(31, 119, 180);
    match series {
        Series::Single(rows) => {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .map(|r| (f64::from(r.attempt), secs(r.delay)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), blue.stroke_width(2)))?
                .label("delay")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue));
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, blue.filled())))?;
        }
        Series::Envelope(rows) => {
            let mut band: Vec<(f64, f64)> = rows
                .iter()
                .map(|r| (f64::from(r.attempt), secs(r.p95)))
                .collect();
            band.extend(
                rows.iter()
                    .rev()
                    .map(|r| (f64::from(r.attempt), secs(r.p5))),
            );
            chart
                .draw_series(std::iter::once(Polygon::new(band, blue.mix(0.25).filled())))?
                .label("p5 to p95")
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 20, y + 5)], blue.mix(0.25).filled())
                });
            chart
                .draw_series(LineSeries::new(
                    rows.iter().map(|r| (f64::from(r.attempt), secs(r.p50))),
                    blue.stroke_width(2),
                ))?
                .label("median")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue));
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()
}
