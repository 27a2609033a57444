//! The report in a real browser: headless Chromium (Debian's `chromium`, which
//! `.ci/run` installs) loads `index.html` from disk; the page must load without a
//! script error, a console error or a failed resource, every plot must be drawn with a
//! non-empty box and marks in it, and a screenshot must not be blank.
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
  var out = document.createElement('pre');
  out.id = 'locksim-probe';
  out.textContent = JSON.stringify({
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

#[test]
fn report_loads_in_chromium_with_every_plot_drawn() {
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
            "fenced",
            "--scenario",
            "no-faults",
            "--scenario",
            "gc-pause",
            "--out",
        ])
        .arg(&out)
        .status()
        .expect("locksim runs");
    assert!(status.success(), "locksim report failed: {status}");
    let page = std::fs::read_to_string(out.join("index.html")).expect("index.html");
    assert!(
        !page.contains("<script"),
        "the report must need no JavaScript"
    );
    // Every PNG the page names exists and is a PNG.
    let pngs: Vec<&str> = page
        .match_indices("href=\"png/")
        .map(|(i, _)| {
            let rest = &page[i + 6..];
            &rest[..rest.find('"').expect("closing quote")]
        })
        .collect();
    assert!(
        pngs.len() >= 2 + 4 + 2,
        "latency, sweep and cell plots: {pngs:?}"
    );
    for p in &pngs {
        let bytes = std::fs::read(out.join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(bytes.starts_with(b"\x89PNG"), "{p} is not a PNG");
        assert_non_blank_png(&bytes, p);
    }

    // The probe's copy, loaded by Chromium; the DOM after load carries the result.
    let probed = out.join("probed.html");
    std::fs::write(
        &probed,
        page.replacen("<head>", &format!("<head>{PROBE}"), 1),
    )
    .expect("write the probe copy");
    let profile = tmp("profile");
    let dump = chromium(&profile)
        .arg("--virtual-time-budget=5000")
        .arg("--dump-dom")
        .arg(format!("file://{}", probed.display()))
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&dump.stdout);
    let start = dom.find("<pre id=\"locksim-probe\">").unwrap_or_else(|| {
        panic!(
            "the probe never ran; chromium said: {}",
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
    assert_eq!(v["errors"], serde_json::json!([]), "errors in the page");
    let resources = v["resources"].as_array().expect("resources");
    assert!(
        resources.is_empty(),
        "the page must load nothing: {resources:?}"
    );
    let plots = v["plots"].as_array().expect("plots");
    assert_eq!(plots.len(), pngs.len(), "one drawn SVG per plot: {plots:?}");
    for p in plots {
        assert!(
            p["width"].as_f64() > Some(100.0) && p["height"].as_f64() > Some(100.0),
            "plot drawn with no size: {p}"
        );
        assert!(
            p["marks"].as_u64() > Some(10),
            "plot with nothing in it: {p}"
        );
        assert!(p["texts"].as_u64() > Some(3), "plot without labels: {p}");
    }
    let diagrams = v["diagrams"].as_array().expect("diagrams");
    assert!(
        !diagrams.is_empty(),
        "a failing cell embeds its sequence diagram"
    );
    for d in diagrams {
        assert!(d["width"].as_f64() > Some(100.0), "diagram not drawn: {d}");
    }

    // A screenshot of the report itself: not blank.
    let shot = out.join("screenshot.png");
    let s = chromium(&tmp("profile2"))
        .arg("--window-size=1400,2000")
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
