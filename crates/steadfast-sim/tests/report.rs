//! The report folder: valid SVG and PNG files, and an index.html that shows them.

mod common;

use std::path::PathBuf;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("steadfast-sim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn report_folder_holds_valid_svg_png_and_an_index() {
    let report = steadfast_sim::run_all(&common::small()).unwrap();
    let dir = temp_dir("report");
    let files = report.write_to(&dir).unwrap();
    assert!(files[0].ends_with("index.html"));
    let index = std::fs::read_to_string(&files[0]).unwrap();
    let svgs: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "svg"))
        .collect();
    let pngs: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "png"))
        .collect();
    assert_eq!(svgs.len(), pngs.len());
    for stem in [
        "herd_attempts",
        "herd_connected",
        "storm_attempts",
        "storm_success",
        "metastable_goodput",
        "metastable_attempts",
        "tail_latency",
    ] {
        assert!(
            svgs.iter().any(|p| p.ends_with(format!("{stem}.svg"))),
            "{stem}"
        );
    }
    for svg in &svgs {
        let text = std::fs::read_to_string(svg).unwrap();
        let doc =
            roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", svg.display()));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        assert_eq!(root.attribute("width"), Some("960"));
        assert_eq!(root.attribute("height"), Some("540"));
        // Lines and text were drawn, not just a background.
        assert!(
            root.descendants().any(|n| n.has_tag_name("polyline")),
            "{}",
            svg.display()
        );
        assert!(
            root.descendants().any(|n| n.has_tag_name("text")),
            "{}",
            svg.display()
        );
        let name = svg.file_name().unwrap().to_str().unwrap();
        assert!(
            index.contains(&format!("src=\"{name}\"")),
            "{name} not in index.html"
        );
    }
    for png in &pngs {
        let bytes = std::fs::read(png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (960, 540));
        // Not a blank image: the plot drew more than the white background.
        assert!(buf.iter().any(|&b| b != 255), "{}", png.display());
        let name = png.file_name().unwrap().to_str().unwrap();
        assert!(
            index.contains(&format!("href=\"{name}\"")),
            "{name} not in index.html"
        );
    }
    // The tables and the verdicts are in the page too.
    assert!(index.contains("<table>"));
    assert!(index.contains("Brooker"));
    assert!(index.contains("Site Reliability Engineering"));
    assert!(index.contains("The Tail at Scale"));
    assert!(index.contains("Metastable Failures in the Wild"));
    // Every figure has a caption that says what to look at, not its title.
    assert_eq!(
        index.matches("<figcaption>").count(),
        svgs.len(),
        "one caption per chart"
    );
    assert!(index.contains("Shaded: the trigger"));
    assert!(
        index.contains("2-minute window"),
        "the throttle's slow recovery is explained"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn summary_has_a_table_per_scenario_and_the_verdicts() {
    let report = steadfast_sim::run_all(&common::small()).unwrap();
    let text = report.summary();
    assert!(text.contains("== herd"));
    assert!(text.contains("== storm"));
    assert!(text.contains("== tail"));
    assert!(text.contains("== metastable"));
    for name in [
        "3 attempts + deadline",
        "no jitter",
        "full jitter",
        "gRPC connection backoff",
        "token bucket",
        "retry budget",
    ] {
        assert!(text.contains(name), "{name}");
    }
    assert!(text.contains("This run agrees") || text.contains("does NOT agree"));
}

#[test]
fn writing_into_a_file_path_is_an_io_error() {
    let report = steadfast_sim::run_all(&steadfast_sim::SimConfig {
        storm: None,
        ..common::small()
    })
    .unwrap();
    let file = temp_dir("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let err = report.write_to(&file).unwrap_err();
    assert!(matches!(err, steadfast_sim::SimError::Io { .. }), "{err}");
    let _ = std::fs::remove_file(&file);
}
