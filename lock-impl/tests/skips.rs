//! A test that skips because a server is missing says so where the person running
//! `cargo test` sees it, not in the output the test harness captures and hides for a
//! passing test (issue 23, item 10: 334 "passed" on a machine without `redis-server`,
//! and not a word that the real-Redis tests never ran).

use std::process::Command;

const MISSING: &str = "locksim-no-such-binary";

/// Runs this test binary again on `probe` alone, as `cargo test` runs it (output
/// captured), and checks that the skip line reached the process's standard error.
#[test]
fn a_skip_is_shown_past_the_harness_capture() {
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "probe", "--test-threads", "1"])
        .env("LOCKSIM_SKIP_PROBE", "1")
        // The probe must skip, not fail as it would under CI's strict setting.
        .env_remove("LOCKSIM_REQUIRE_REDIS")
        .output()
        .expect("run the probe");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the probe ran: {stdout}");
    assert!(
        stderr.contains(&format!("SKIPPED: {MISSING} is not on PATH")),
        "the skip line is not shown: stdout {stdout:?}, stderr {stderr:?}"
    );
}

/// Skips as a real-Redis test does when its server is missing (only when asked to by
/// the test above; alone it does nothing).
#[test]
fn probe() {
    if std::env::var_os("LOCKSIM_SKIP_PROBE").is_none() {
        return;
    }
    assert!(!lock_impl::testing::binary_available(MISSING, "nothing"));
}
