//! Rates with their 95 % intervals (exact Clopper–Pearson): the numbers on known
//! counts, checked against values from the regularized incomplete beta function
//! (mpmath, 30 digits), and the text each count prints.

use scenarios::stats::{self, Bound, Rate};

fn close(got: f64, want: f64) {
    assert!(
        (got - want).abs() < 1e-9,
        "got {got}, want {want} (off by {})",
        (got - want).abs()
    );
}

#[test]
fn three_in_thirty_is_ten_percent_with_a_two_sided_interval_of_2_1_to_27_percent() {
    let r = Rate::of(3, 30).unwrap();
    assert_eq!((r.count, r.runs, r.bound), (3, 30, Bound::TwoSided));
    close(r.share, 0.1);
    close(r.low, 0.021_117_137_029_7);
    close(r.high, 0.265_288_450_474);
    assert_eq!(r.text(), "3/30, 10%, 95% CI 2.1–27%");
    assert_eq!(r.claim(), "10%, 95% CI 2.1–27%");
    assert_eq!(r.short(), "3/30 2.1–27%");
    assert_eq!(
        stats::describe("unsafe", 3, 30),
        "unsafe 3/30, 10%, 95% CI 2.1–27%"
    );
}

#[test]
fn no_violation_in_sixty_runs_bounds_the_rate_below_4_9_percent_one_sided() {
    let r = Rate::of(0, 60).unwrap();
    assert_eq!(r.bound, Bound::Upper);
    assert_eq!((r.share, r.low), (0.0, 0.0));
    // 1 − 0.05^(1/60), not the rule of three's 3/60 = 5 %.
    close(r.high, 0.048_702_913_310_1);
    assert_eq!(r.text(), "0/60: rate < 4.9% at 95%");
    assert_eq!(r.claim(), "rate < 4.9% at 95%");
    assert_eq!(r.short(), "0/60 <4.9%");
    close(Rate::of(0, 30).unwrap().high, 0.095_033_852_855_3);
    close(Rate::of(0, 300).unwrap().high, 0.009_936_081_944_46);
    assert_eq!(
        Rate::of(0, 300).unwrap().text(),
        "0/300: rate < 1.0% at 95%"
    );
}

#[test]
fn every_run_in_the_class_bounds_the_rate_from_below_one_sided() {
    let r = Rate::of(30, 30).unwrap();
    assert_eq!(r.bound, Bound::Lower);
    assert_eq!((r.share, r.high), (1.0, 1.0));
    close(r.low, 0.904_966_147_145);
    assert_eq!(r.text(), "30/30: rate > 90% at 95%");
    assert_eq!(r.short(), "30/30 >90%");
}

#[test]
fn one_run_says_little_either_way() {
    let one = Rate::of(1, 1).unwrap();
    assert_eq!(one.bound, Bound::Lower);
    close(one.low, 0.05);
    assert_eq!(one.text(), "1/1: rate > 5.0% at 95%");
    let none = Rate::of(0, 1).unwrap();
    close(none.high, 0.95);
    assert_eq!(none.text(), "0/1: rate < 95% at 95%");
}

#[test]
fn no_runs_give_no_interval_and_say_so() {
    assert_eq!(Rate::of(0, 0), None);
    assert_eq!(
        stats::describe("unsafe", 0, 0),
        "unsafe 0/0: no runs, no interval"
    );
    assert_eq!(stats::short(0, 0), "-");
}

#[test]
fn interior_counts_match_the_incomplete_beta_function() {
    for (k, n, low, high) in [
        (1, 2, 0.012_579_117_093_4, 0.987_420_882_907),
        (5, 10, 0.187_086_028_447, 0.812_913_971_553),
        (1, 100, 0.000_253_146_032_977, 0.054_459_385_392_1),
        (99, 100, 0.945_540_614_608, 0.999_746_853_967),
        (50, 1000, 0.037_335_397_604_7, 0.065_390_487_915_5),
        (7, 60, 0.048_214_841_871_3, 0.225_716_153_146),
    ] {
        let r = Rate::of(k, n).unwrap();
        assert_eq!(r.bound, Bound::TwoSided, "{k}/{n}");
        close(r.low, low);
        close(r.high, high);
        assert!(r.low < r.share && r.share < r.high, "{k}/{n}: {r:?}");
    }
}

#[test]
fn printed_bounds_are_rounded_outwards_so_they_contain_the_exact_interval() {
    // 1/100: 0.0253 %–5.45 % prints as 0.025–5.5 %.
    assert_eq!(
        Rate::of(1, 100).unwrap().text(),
        "1/100, 1.0%, 95% CI 0.025–5.5%"
    );
    // 7/60: 4.82 %–22.57 % prints as 4.8–23 %.
    assert_eq!(Rate::of(7, 60).unwrap().text(), "7/60, 12%, 95% CI 4.8–23%");
    // 99/100: 94.55 %–99.97 % prints as 94–100 %.
    assert_eq!(
        Rate::of(99, 100).unwrap().text(),
        "99/100, 99%, 95% CI 94–100%"
    );
}

#[test]
fn a_rate_serializes_as_numbers() {
    let v = serde_json::to_value(Rate::of(3, 30).unwrap()).unwrap();
    assert_eq!(v["count"], 3);
    assert_eq!(v["runs"], 30);
    assert_eq!(v["bound"], "two-sided");
    assert!((v["low"].as_f64().unwrap() - 0.0211).abs() < 1e-4);
    assert!((v["high"].as_f64().unwrap() - 0.2653).abs() < 1e-4);
}
