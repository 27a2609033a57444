//! Acquire latency summaries.

mod common;

use reports::latency::{LatencySummary, Quantiles};

#[test]
fn acquire_latencies_are_split_by_outcome() {
    let s = LatencySummary::from_history(&common::history()).unwrap();
    assert_eq!(s.runs, 1);
    assert_eq!(s.ok_us.len(), 2);
    assert_eq!(s.fail_us.len(), 1);
    assert_eq!(s.info_us.len(), 0);
    assert_eq!(s.never_completed, 1);
    let ok = s.ok();
    assert_eq!(ok.count, 2);
    // 3 significant digits: 10 ms and 1103 ms come back within 0.1%.
    assert!((ok.p50_ms - 10.0).abs() < 0.02, "{ok:?}");
    assert!((ok.max_ms - 1_103.0).abs() < 1.2, "{ok:?}");
    assert!((s.fail().max_ms - 20.0).abs() < 0.03);
    assert_eq!(s.info(), Quantiles::default());
}

#[test]
fn summaries_of_many_runs_merge() {
    let one = LatencySummary::from_history(&common::history()).unwrap();
    let mut all = LatencySummary::default();
    for _ in 0..3 {
        all.merge(&one);
    }
    assert_eq!(all.runs, 3);
    assert_eq!(all.ok_us.len(), 6);
    assert_eq!(all.never_completed, 3);
    assert_eq!(all.ok().max_ms, one.ok().max_ms);
}

#[test]
fn a_summary_round_trips_through_json_and_still_merges() {
    let one = LatencySummary::from_history(&common::history()).unwrap();
    let json = serde_json::to_string(&one).unwrap();
    let mut back: LatencySummary = serde_json::from_str(&json).unwrap();
    assert_eq!(back, one);
    // Much larger values than the original held: the histogram must still resize.
    let mut big = LatencySummary::default();
    big.ok_us.record(3_600_000_000).unwrap();
    back.merge(&big);
    assert_eq!(back.ok_us.len(), 3);
}

#[test]
fn a_malformed_history_has_no_latency_summary() {
    let mut h = common::history();
    h.events.remove(0); // the first acquire's invocation
    assert!(LatencySummary::from_history(&h).is_err());
}

/// A plot's PNG file (written by `plot::render`, the report's `png/` folder) decodes
/// as 8-bit RGB at the plot's size, with the white background and the drawing's
/// colours both in it.
#[test]
fn a_plot_is_written_as_a_png_of_its_size() {
    use reports::plot::{self, Draw, Percentiles, Series};
    if let Err(e) = plot::init_font() {
        // The plots need a TrueType font (fonts-dejavu-core); CI installs one.
        assert!(std::env::var_os("LOCKSIM_REQUIRE_BROWSER").is_none(), "{e}");
        eprintln!("skipped: {e}");
        return;
    }
    let s = LatencySummary::from_history(&common::history()).unwrap();
    let p = Percentiles {
        title: "acquire latency".into(),
        series: vec![Series {
            label: "ok".into(),
            color: plot::COLORS[3],
            points: plot::percentile_points(&s.ok_us),
            band: Vec::new(),
        }],
    };
    let dir = std::env::temp_dir().join(format!("locksim-png-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("latency.png");
    let svg = plot::render(&p, Some(&path)).unwrap();
    assert!(svg.contains("<svg"), "the SVG is returned as well");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((frame.width, frame.height), p.size());
    assert_eq!(frame.color_type, png::ColorType::Rgb);
    assert_eq!(frame.bit_depth, png::BitDepth::Eight);
    let rgb: Vec<&[u8]> = pixels[..frame.buffer_size()].chunks(3).collect();
    assert!(
        rgb.iter().any(|c| *c == [255, 255, 255]),
        "a white background"
    );
    let red = plot::COLORS[3];
    assert!(
        rgb.iter().any(|c| *c == [red.0, red.1, red.2]),
        "the series' line in its colour"
    );
}
