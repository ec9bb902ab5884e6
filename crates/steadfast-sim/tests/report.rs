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
        "quota_received",
        "quota_goodput",
        "quota_latency",
        "replicas_bad_load",
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
fn the_page_opens_with_contents_linking_every_section_table_and_chart() {
    let report = steadfast_sim::run_all(&common::small()).unwrap();
    let dir = temp_dir("contents");
    let files = report.write_to(&dir).unwrap();
    let index = std::fs::read_to_string(&files[0]).unwrap();
    let nav_start = index
        .find("<nav id=\"contents\">")
        .expect("a table of contents");
    let nav = &index[nav_start..index.find("</nav>").unwrap()];
    assert!(
        nav_start < index.find("<section").unwrap(),
        "contents first"
    );
    let sections: Vec<&str> = index
        .match_indices("<section id=\"")
        .map(|(i, m)| {
            let rest = &index[i + m.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    assert!(sections.len() >= 4, "{sections:?}");
    for id in &sections {
        assert!(nav.contains(&format!("href=\"#{id}\"")), "{id}: {nav}");
        assert!(
            nav.contains(&format!("href=\"#{id}-table\"")),
            "{id}: {nav}"
        );
        assert!(index.contains(&format!("id=\"{id}-table\"")), "{id}");
    }
    // Every chart has an anchor, and the contents link to it.
    for svg in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "svg"))
    {
        let stem = svg.file_stem().unwrap().to_str().unwrap();
        assert!(index.contains(&format!("<figure id=\"{stem}\">")), "{stem}");
        assert!(nav.contains(&format!("href=\"#{stem}\"")), "{stem}");
    }
    // Each section links back to the contents.
    assert_eq!(index.matches("href=\"#contents\"").count(), sections.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn thresholds_are_said_as_the_test_applied_not_as_a_result() {
    let report = steadfast_sim::run_all(&common::small()).unwrap();
    let agreements = [
        report.herd.as_ref().and_then(|r| r.agreement.as_ref()),
        report.storm.as_ref().and_then(|r| r.agreement.as_ref()),
        report
            .metastable
            .as_ref()
            .and_then(|r| r.agreement.as_ref()),
        report.tail.as_ref().and_then(|r| r.agreement.as_ref()),
    ];
    for a in agreements.into_iter().flatten() {
        assert!(!a.claim.contains("here:"), "{}", a.claim);
        assert!(!a.criterion.is_empty(), "{}", a.source);
        assert!(
            a.to_string()
                .contains(&format!("Counted as agreeing when {}", a.criterion)),
            "{a}"
        );
    }
    let m = report
        .metastable
        .as_ref()
        .unwrap()
        .agreement
        .as_ref()
        .unwrap();
    assert!(
        m.criterion.contains("at most 15 s after the trigger ends"),
        "{}",
        m.criterion
    );
    let dir = temp_dir("criterion");
    let files = report.write_to(&dir).unwrap();
    let index = std::fs::read_to_string(&files[0]).unwrap();
    assert!(index.contains("<br>Counted as agreeing when"), "{index}");
    assert!(!index.contains("no advice against"), "{index}");
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
