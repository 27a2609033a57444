//! A rate with its uncertainty: how many of `runs` runs fell in some class, and the
//! 95 % interval of the true per-run rate that count supports.
//!
//! The interval is the exact **Clopper–Pearson** interval, not Wilson's score interval:
//! - it never covers less than its confidence, at any rate and any `runs` (Wilson's
//!   dips below 95 % for rates near 0, exactly where a "safe" cell's claim lives);
//! - at zero violations it is the exact one-sided bound `1 − 0.05^(1/n)` (60 clean runs:
//!   below 4.87 %), so the matrix's "safe" claim and the interval are one computation,
//!   where Wilson would need a second rule (the rule of three, `3/n`, is only its
//!   large-`n` approximation);
//! - runs are few (tens to hundreds), so being conservative costs little and an exact
//!   answer is cheap: each bound is found by bisection on the binomial distribution
//!   itself, summed term by term (no incomplete beta function needed).
//!
//! Between the edges (`0 < count < runs`) the interval is two-sided: each bound leaves
//! 2.5 % of the binomial distribution beyond it. At an edge the claim is one-sided, as
//! it is read: `count = 0` gives "rate < high at 95 %" (`low = 0`), `count = runs`
//! gives "rate > low at 95 %" (`high = 1`), each leaving the whole 5 % on its side.
//! No runs, no interval ([`Rate::of`] returns `None`).

use serde::{Deserialize, Serialize};

/// The confidence of every interval: 95 %.
pub const CONFIDENCE: f64 = 0.95;

/// The method's name, as JSON output names it.
pub const METHOD: &str = "clopper-pearson";

/// Which claim a [`Rate`]'s bounds make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// `0 < count < runs`: the rate lies in `low..=high` at 95 % (2.5 % each side).
    TwoSided,
    /// `count = 0`: the rate is below `high` at 95 % (`low` is 0).
    Upper,
    /// `count = runs`: the rate is above `low` at 95 % (`high` is 1).
    Lower,
}

/// `count` of `runs` runs, the observed share, and its 95 % Clopper–Pearson bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Runs in the class.
    pub count: u64,
    /// Runs in all.
    pub runs: u64,
    /// `count / runs`.
    pub share: f64,
    /// The lower bound of the rate (0 when `count` is 0).
    pub low: f64,
    /// The upper bound of the rate (1 when `count` is `runs`).
    pub high: f64,
    /// Which claim the bounds make.
    pub bound: Bound,
}

impl Rate {
    /// The rate of `count` in `runs` with its 95 % interval; `None` with no runs.
    ///
    /// # Panics
    /// If `count > runs` (a caller's bookkeeping bug, never input).
    pub fn of(count: u64, runs: u64) -> Option<Rate> {
        assert!(count <= runs, "{count} of {runs} runs");
        if runs == 0 {
            return None;
        }
        let alpha = 1.0 - CONFIDENCE;
        let (low, high, bound) = if count == 0 {
            (0.0, 1.0 - alpha.powf(1.0 / runs as f64), Bound::Upper)
        } else if count == runs {
            (alpha.powf(1.0 / runs as f64), 1.0, Bound::Lower)
        } else {
            // low: P(X ≥ count | low) = α/2, a tail that grows with p;
            // high: P(X ≤ count | high) = α/2, a tail that shrinks as p grows.
            let low = solve(|p| at_least(count, runs, p), alpha / 2.0, true);
            let high = solve(|p| 1.0 - at_least(count + 1, runs, p), alpha / 2.0, false);
            (low, high, Bound::TwoSided)
        };
        Some(Rate {
            count,
            runs,
            share: count as f64 / runs as f64,
            low,
            high,
            bound,
        })
    }

    /// The claim without a label: `3/30, 10%, 95% CI 2.1–27%`; `0/60: rate < 4.9% at
    /// 95%`; `30/30: rate > 90% at 95%`. Bounds are rounded outwards (to two
    /// significant digits), so the printed interval always contains the exact one.
    pub fn text(&self) -> String {
        let sep = if self.bound == Bound::TwoSided {
            ","
        } else {
            ":"
        };
        format!("{}/{}{sep} {}", self.count, self.runs, self.claim())
    }

    /// The claim without the counts: `10%, 95% CI 2.1–27%`, `rate < 4.9% at 95%`,
    /// `rate > 90% at 95%`.
    pub fn claim(&self) -> String {
        match self.bound {
            Bound::TwoSided => format!(
                "{}%, 95% CI {}–{}%",
                percent(self.share, Round::Nearest),
                percent(self.low, Round::Down),
                percent(self.high, Round::Up)
            ),
            Bound::Upper => format!("rate < {}% at 95%", percent(self.high, Round::Up)),
            Bound::Lower => format!("rate > {}% at 95%", percent(self.low, Round::Down)),
        }
    }

    /// The claim for a table cell: `3/30 2.1–27%`, `0/60 <4.9%`, `30/30 >90%`.
    pub fn short(&self) -> String {
        format!("{}/{} {}", self.count, self.runs, self.interval())
    }

    /// The bounds alone: `2.1–27%`, `<4.9%`, `>90%`.
    pub fn interval(&self) -> String {
        match self.bound {
            Bound::TwoSided => format!(
                "{}–{}%",
                percent(self.low, Round::Down),
                percent(self.high, Round::Up)
            ),
            Bound::Upper => format!("<{}%", percent(self.high, Round::Up)),
            Bound::Lower => format!(">{}%", percent(self.low, Round::Down)),
        }
    }
}

/// `label` and the claim of `count` in `runs` (`unsafe 3/30, 10%, 95% CI 2.1–27%`), or
/// `label 0/0: no runs, no interval`.
pub fn describe(label: &str, count: u64, runs: u64) -> String {
    match Rate::of(count, runs) {
        Some(r) => format!("{label} {}", r.text()),
        None => format!("{label} 0/0: no runs, no interval"),
    }
}

/// [`Rate::short`], or `-` with no runs.
pub fn short(count: u64, runs: u64) -> String {
    Rate::of(count, runs).map_or_else(|| "-".to_string(), |r| r.short())
}

/// How [`percent`] rounds.
#[derive(Debug, Clone, Copy)]
enum Round {
    Down,
    Nearest,
    Up,
}

/// `x` (0..=1) as a percentage with two significant digits (`27`, `4.9`, `0.49`), and
/// `0` / `100` at the ends.
fn percent(x: f64, round: Round) -> String {
    let v = x * 100.0;
    if v <= 0.0 {
        return "0".into();
    }
    if v >= 100.0 {
        return "100".into();
    }
    let decimals = (1 - v.log10().floor() as i32).max(0);
    let scale = 10f64.powi(decimals);
    // A hair of slack so that an exact 27.0 computed as 27.000000000001 stays 27.
    let scaled = v * scale;
    let r = match round {
        Round::Down => (scaled + 1e-9).floor(),
        Round::Nearest => scaled.round(),
        Round::Up => (scaled - 1e-9).ceil(),
    } / scale;
    let r = r.min(100.0);
    // Rounding up may cross a decade (0.996 → 1.00): two digits again (1.0).
    let decimals = if r > 0.0 {
        decimals.min((1 - r.log10().floor() as i32).max(0))
    } else {
        decimals
    };
    format!("{:.*}", decimals as usize, r)
}

/// `P(X ≥ k)` for `X ~ Binomial(n, p)`, summing the shorter side's terms in log space.
fn at_least(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if k > n {
        return 0.0;
    }
    if k > n / 2 {
        // The upper tail itself: k..=n.
        sum_pmf(n, p, k, n)
    } else {
        1.0 - sum_pmf(n, p, 0, k - 1)
    }
}

/// `Σ P(X = i)` for `i` in `from..=to`, `X ~ Binomial(n, p)`, `0 < p < 1`.
fn sum_pmf(n: u64, p: f64, from: u64, to: u64) -> f64 {
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    // ln C(n, from), built up term by term.
    let mut ln_c = 0.0;
    for i in 0..from {
        ln_c += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    let mut sum = 0.0;
    for i in from..=to {
        sum += (ln_c + i as f64 * lp + (n - i) as f64 * lq).exp();
        if i < n {
            ln_c += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        }
    }
    sum.min(1.0)
}

/// The `p` in (0, 1) where the monotone `f(p)` equals `target` (`rising`: `f` grows
/// with `p`), by bisection to the precision of an `f64`.
fn solve(f: impl Fn(f64) -> f64, target: f64, rising: bool) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if (f(mid) < target) == rising {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}
