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

use crate::SimError;

/// DejaVu Sans (Bitstream Vera license; see `assets/LICENSE-DejaVu.txt`).
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
const FONT_NAME: &str = "DejaVu Sans";
const SIZE: (u32, u32) = (960, 540);
/// The legend's column, right of the plot (never over the data).
const LEGEND_WIDTH: u32 = 210;

/// The Okabe–Ito palette (safe for the common forms of colour blindness),
/// without its yellow, which is too pale on white.
const COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(230, 159, 0),   // orange
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
];

/// One line of a chart.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// A shaded span of x (an outage, a trigger), labelled inside the plot.
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
    /// What to look at, shown under the chart in `index.html`.
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
    /// The palette colour of the first line; the others take the next
    /// ones. So a strategy keeps its colour in every chart of a section,
    /// even in one that leaves some strategies out.
    pub(crate) first_color: usize,
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
    if let Some(shade) = &chart.shade {
        let (lo, hi) = (ctx.y_range().start, ctx.y_range().end);
        let (a, b) = (shade.from.max(xs.start), shade.to.min(xs.end));
        ctx.draw_series(std::iter::once(Rectangle::new(
            [(a, lo), (b, hi)],
            RGBColor(120, 120, 120).mix(0.15).filled(),
        )))
        .map_err(|e| err(&e))?;
        // The label, just inside the top left of the span.
        let top = if chart.log_y {
            hi / 1.25
        } else {
            hi - (hi - lo) * 0.02
        };
        ctx.draw_series(std::iter::once(Text::new(
            shade.label.clone(),
            (a + (xs.end - xs.start) * 0.005, top),
            (FAMILY, 14).into_font().color(&RGBColor(60, 60, 60)),
        )))
        .map_err(|e| err(&e))?;
    }
    // Drawn last to first, so the first lines (the baselines the others
    // are read against) stay on top where lines overlap.
    for (i, line) in chart.lines.iter().enumerate().rev() {
        let color = COLORS[(chart.first_color + i) % COLORS.len()];
        let points: Vec<(f64, f64)> = line
            .points
            .iter()
            .copied()
            .filter(|&(x, y)| {
                x.is_finite() && y.is_finite() && x <= xs.end && !(chart.log_y && y <= 0.0)
            })
            .collect();
        ctx.draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(|e| err(&e))?;
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

/// The legend, in its own column right of the plot.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let style = (FAMILY, 14).into_font().color(&BLACK);
    for (i, line) in chart.lines.iter().enumerate() {
        let color = COLORS[(chart.first_color + i) % COLORS.len()];
        let y = 70 + 26 * i32::try_from(i).unwrap_or(0);
        area.draw(&PathElement::new(
            vec![(4, y), (30, y)],
            color.stroke_width(3),
        ))
        .map_err(|e| err(&e))?;
        area.draw(&Text::new(line.name.clone(), (38, y - 8), style.clone()))
            .map_err(|e| err(&e))?;
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
