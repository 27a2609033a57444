//! The report in a real browser: headless Chromium (Debian's `chromium`, which
//! `.ci/run` installs) loads `index.html`, `latency.html` and every failing cell's page
//! from disk in a 1,600 × 1,000 window; each page must load without a script error, a
//! console error or a failed resource, every plot must be drawn with a non-empty box
//! and marks in it, the matrix must fit the window's width, and a screenshot must not
//! be blank. The default output must stay under 5 MB.
//!
//! Without Chromium the test says so and passes, unless `LOCKSIM_REQUIRE_BROWSER=1`
//! (set by `.ci/run`), where a missing browser fails it.

use std::path::{Path, PathBuf};
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Flags for a headless Chromium on a machine with no network (no background
/// connections, no first-run work), as root (no sandbox), in a fresh profile.
fn chromium(profile: &Path) -> Command {
    let mut c = Command::new(CHROMIUM);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// The check the page gets in the test's copy (the report itself has no scripts): it
/// records every error, opens every `<details>`, and on load measures each plot.
const PROBE: &str = r#"<script>
window.__errors = [];
window.addEventListener('error', function (e) {
  var t = e.target && e.target !== window ? (e.target.src || e.target.href || e.target.tagName) : '';
  window.__errors.push('error: ' + (e.message || 'resource failed: ' + t));
}, true);
(function () {
  var orig = console.error;
  console.error = function () { window.__errors.push('console.error: ' + Array.prototype.join.call(arguments, ' ')); orig.apply(console, arguments); };
})();
window.addEventListener('load', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  var plots = [];
  document.querySelectorAll('div.plot').forEach(function (p) {
    var svg = p.querySelector('svg');
    var box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    // Data marks: plotters draws lines as polylines, points as circles, bars as
    // rects (one rect is the background); mesh lines are <line>s and do not count.
    var marks = svg ? svg.querySelectorAll('polyline, rect, circle').length - 1 : 0;
    var texts = svg ? svg.querySelectorAll('text').length : 0;
    plots.push({id: p.id, width: box.width, height: box.height, marks: marks, texts: texts});
  });
  var diagrams = [];
  document.querySelectorAll('details.diagram svg').forEach(function (s) {
    var b = s.getBoundingClientRect();
    diagrams.push({width: b.width, height: b.height});
  });
  var matrices = [];
  document.querySelectorAll('table.matrix').forEach(function (t) {
    var b = t.getBoundingClientRect();
    matrices.push({left: b.left, right: b.right});
  });
  var out = document.createElement('pre');
  out.id = 'locksim-probe';
  out.textContent = JSON.stringify({
    innerWidth: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    matrices: matrices,
    errors: window.__errors,
    resources: performance.getEntriesByType('resource').map(function (r) { return r.name; }),
    plots: plots,
    diagrams: diagrams
  });
  document.body.appendChild(out);
});
</script>"#;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("locksim-browser-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The window the report is checked in (and `docs/report.png` taken at).
const WIDTH: u32 = 1600;
const HEIGHT: u32 = 1000;

/// What the probe found on one page, loaded from disk by Chromium.
fn probe(page: &Path, profile: &Path) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    assert!(
        !html.contains("<script"),
        "{}: the report must need no JavaScript",
        page.display()
    );
    // The probe's copy, beside the page (so its relative links resolve the same).
    let probed = page.with_extension("probed.html");
    std::fs::write(
        &probed,
        html.replacen("<head>", &format!("<head>{PROBE}"), 1),
    )
    .expect("write the probe copy");
    let dump = chromium(profile)
        .arg(format!("--window-size={WIDTH},{HEIGHT}"))
        .arg("--virtual-time-budget=5000")
        .arg("--dump-dom")
        .arg(format!("file://{}", probed.display()))
        .output()
        .expect("chromium runs");
    let _ = std::fs::remove_file(&probed);
    let dom = String::from_utf8_lossy(&dump.stdout);
    let start = dom.find("<pre id=\"locksim-probe\">").unwrap_or_else(|| {
        panic!(
            "{}: the probe never ran; chromium said: {}",
            page.display(),
            String::from_utf8_lossy(&dump.stderr)
        )
    }) + "<pre id=\"locksim-probe\">".len();
    let json = &dom[start..start + dom[start..].find("</pre>").expect("end of probe")];
    let json = json
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let v: serde_json::Value = serde_json::from_str(&json).expect("probe JSON");
    let name = page.display();
    assert_eq!(
        v["errors"],
        serde_json::json!([]),
        "{name}: errors in the page"
    );
    let resources = v["resources"].as_array().expect("resources");
    assert!(
        resources.is_empty(),
        "{name}: the page must load nothing: {resources:?}"
    );
    assert_eq!(
        v["innerWidth"].as_u64(),
        Some(u64::from(WIDTH)),
        "{name}: the window is not {WIDTH} px wide, so its widths prove nothing"
    );
    for p in v["plots"].as_array().expect("plots") {
        assert!(
            p["width"].as_f64() > Some(100.0) && p["height"].as_f64() > Some(100.0),
            "{name}: plot drawn with no size: {p}"
        );
        assert!(
            p["marks"].as_u64() > Some(10),
            "{name}: plot with nothing in it: {p}"
        );
        assert!(
            p["texts"].as_u64() > Some(3),
            "{name}: plot without labels: {p}"
        );
    }
    for d in v["diagrams"].as_array().expect("diagrams") {
        assert!(
            d["width"].as_f64() > Some(100.0),
            "{name}: diagram not drawn: {d}"
        );
    }
    v
}

/// Bytes under `dir`, every file.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("readable")
        .flatten()
        .map(|e| {
            let m = e.metadata().expect("metadata");
            if m.is_dir() {
                bytes_under(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

#[test]
fn report_opens_in_chromium_fits_1600_pixels_and_links_a_page_per_failing_cell() {
    if !Path::new(CHROMIUM).exists() {
        assert!(
            std::env::var("LOCKSIM_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "LOCKSIM_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install chromium)"
        );
        lock_impl::testing::skipped(&format!(
            "{CHROMIUM} is not installed (apt-get install chromium): the report's browser test did not run"
        ));
        return;
    }
    // Two single-master Redis designs (one with the longest name of the catalog) over
    // every scenario: the widest table the matrix draws, with the sweeps.
    let out = tmp("report");
    let status = Command::new(env!("CARGO_BIN_EXE_locksim"))
        .args([
            "report",
            "--seeds",
            "0..1",
            "--sweep-seeds",
            "0..1",
            "--design",
            "set-nx-px-lua",
            "--design",
            "broken/read-renewal-skips-timeouts",
            "--out",
        ])
        .arg(&out)
        .status()
        .expect("locksim runs");
    assert!(status.success(), "locksim report failed: {status}");
    let total = bytes_under(&out);
    assert!(
        total < 5_000_000,
        "the default report must stay under 5 MB: {total} bytes"
    );
    assert!(
        !out.join("png").exists(),
        "the default report writes no PNG (--full does)"
    );
    let page = std::fs::read_to_string(out.join("index.html")).expect("index.html");
    // Every failing cell's page is linked from the matrix, and exists.
    let cells: Vec<String> = page
        .match_indices("href=\"cells/")
        .map(|(i, _)| {
            let rest = &page[i + 6..];
            rest[..rest.find('"').expect("closing quote")].to_string()
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert!(cells.len() >= 5, "failing cells linked: {cells:?}");
    for c in &cells {
        assert!(out.join(c).is_file(), "{c} is linked but missing");
    }

    let index = probe(&out.join("index.html"), &tmp("profile-index"));
    let matrices = index["matrices"].as_array().expect("matrices");
    assert!(
        matrices.len() >= 2,
        "the comparison and the matrix: {matrices:?}"
    );
    for m in matrices {
        assert!(
            m["right"].as_f64() <= Some(f64::from(WIDTH)),
            "a matrix overflows {WIDTH} px: {m}"
        );
    }
    assert!(
        index["scrollWidth"].as_u64() <= Some(u64::from(WIDTH)),
        "the page scrolls sideways at {WIDTH} px: {}",
        index["scrollWidth"]
    );
    let plots = index["plots"].as_array().expect("plots");
    assert_eq!(plots.len(), 4, "the four sweeps' plots: {plots:?}");

    let latency = probe(&out.join("latency.html"), &tmp("profile-latency"));
    assert_eq!(
        latency["plots"].as_array().map(Vec::len),
        Some(2),
        "a latency plot per design"
    );
    for (i, c) in cells.iter().enumerate() {
        let v = probe(&out.join(c), &tmp(&format!("profile-cell-{i}")));
        assert_eq!(
            v["plots"].as_array().map(Vec::len),
            Some(1),
            "{c}: its holder timeline"
        );
        assert_eq!(
            v["diagrams"].as_array().map(Vec::len),
            Some(1),
            "{c}: its sequence diagram"
        );
    }

    // A screenshot of the report itself, as a reader's window shows it: not blank.
    let shot = out.join("screenshot.png");
    let s = chromium(&tmp("profile-shot"))
        .arg(format!("--window-size={WIDTH},{HEIGHT}"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", out.join("index.html").display()))
        .output()
        .expect("chromium runs");
    let bytes = std::fs::read(&shot).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}); chromium said: {}",
            String::from_utf8_lossy(&s.stderr)
        )
    });
    assert_non_blank_png(&bytes, "screenshot");
    eprintln!("screenshot: {}", shot.display());
}

/// Decodes a PNG and asserts that a fair share of it is neither white nor one colour.
fn assert_non_blank_png(bytes: &[u8], what: &str) {
    let decoder = png::Decoder::new(bytes);
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    let px = info.color_type.samples();
    let data = &buf[..info.buffer_size()];
    let pixels = data.len() / px;
    let first = &data[..px];
    let (mut not_white, mut not_first) = (0usize, 0usize);
    for p in data.chunks(px) {
        if p[..3.min(px)].iter().any(|c| *c < 240) {
            not_white += 1;
        }
        if p != first {
            not_first += 1;
        }
    }
    assert!(
        not_white * 100 > pixels && not_first * 100 > pixels,
        "{what} is blank: {not_white} of {pixels} pixels not white"
    );
}
