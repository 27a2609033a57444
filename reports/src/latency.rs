//! Acquire latency: how long clients wait for the lock, as hdrhistograms.
//!
//! One [`LatencySummary`] per run, built from its history alone; summaries of many
//! runs (or of shards run on other machines) merge with [`LatencySummary::merge`].
//! Values are recorded in simulated microseconds for precision and reported in
//! milliseconds. The serde form stores each histogram in hdrhistogram's own V2
//! deflate encoding (hex), so other HdrHistogram tools can read it and merging loses
//! nothing.

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use scenarios::checkers::model;
use serde::{Deserialize, Serialize};
use sim::history::{History, OpF, Phase};

/// Three significant digits: 0.1% error, plenty for latency quantiles.
const SIGFIG: u8 = 3;

fn empty() -> Histogram<u64> {
    // `new` auto-resizes, so no latency is ever too large to record.
    Histogram::new(SIGFIG).expect("3 significant figures is a valid histogram")
}

/// Acquire latencies of one or more runs, split by outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencySummary {
    /// How many runs were merged in.
    pub runs: u64,
    /// Invoke → `ok`, in microseconds.
    #[serde(with = "hist_hex")]
    pub ok_us: Histogram<u64>,
    /// Invoke → `fail`, in microseconds.
    #[serde(with = "hist_hex")]
    pub fail_us: Histogram<u64>,
    /// Invoke → `info` (an explicit unknown outcome, e.g. a timeout), in microseconds.
    #[serde(with = "hist_hex")]
    pub info_us: Histogram<u64>,
    /// Acquires never completed (their host crashed, or the run ended): `info` with no
    /// latency to record, counted only.
    pub never_completed: u64,
}

impl Default for LatencySummary {
    fn default() -> Self {
        LatencySummary {
            runs: 0,
            ok_us: empty(),
            fail_us: empty(),
            info_us: empty(),
            never_completed: 0,
        }
    }
}

impl PartialEq for LatencySummary {
    fn eq(&self, o: &Self) -> bool {
        self.runs == o.runs
            && self.never_completed == o.never_completed
            && self.ok_us == o.ok_us
            && self.fail_us == o.fail_us
            && self.info_us == o.info_us
    }
}

/// Quantiles of one histogram, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Quantiles {
    /// Number of samples.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl Quantiles {
    /// Quantiles of a histogram of microseconds (all zero when empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Quantiles::default();
        }
        let ms = |us: u64| us as f64 / 1_000.0;
        Quantiles {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
        }
    }
}

impl LatencySummary {
    /// The acquire latencies of one run. Errors if the history's operations do not
    /// pair up (a malformed history has no meaningful latencies).
    pub fn from_history(h: &History) -> Result<Self, String> {
        let mut s = LatencySummary {
            runs: 1,
            ..LatencySummary::default()
        };
        for p in model::op_pairs(h)?.iter().filter(|p| p.f == OpF::Acquire) {
            let Some(done_us) = p.completion_us else {
                s.never_completed += 1;
                continue;
            };
            let us = done_us.saturating_sub(p.invoke_us);
            let hist = match p.outcome {
                Phase::Ok => &mut s.ok_us,
                Phase::Fail => &mut s.fail_us,
                Phase::Info | Phase::Invoke => &mut s.info_us,
            };
            // `record`, not `saturating_record`: the latter clamps to the current
            // range instead of growing an auto-resizing histogram.
            hist.record(us)
                .expect("an auto-resizing histogram records any u64");
        }
        Ok(s)
    }

    /// Adds another summary's runs and samples to this one.
    pub fn merge(&mut self, other: &LatencySummary) {
        self.runs += other.runs;
        self.never_completed += other.never_completed;
        // Auto-resizing histograms with equal precision always add.
        for (mine, theirs) in [
            (&mut self.ok_us, &other.ok_us),
            (&mut self.fail_us, &other.fail_us),
            (&mut self.info_us, &other.info_us),
        ] {
            mine.add(theirs)
                .expect("auto-resizing histograms always add");
        }
    }

    /// Quantiles of successful acquires.
    pub fn ok(&self) -> Quantiles {
        Quantiles::of(&self.ok_us)
    }

    /// Quantiles of failed acquires.
    pub fn fail(&self) -> Quantiles {
        Quantiles::of(&self.fail_us)
    }

    /// Quantiles of acquires with an unknown outcome.
    pub fn info(&self) -> Quantiles {
        Quantiles::of(&self.info_us)
    }
}

/// A histogram as the hex of hdrhistogram's V2 deflate serialization. Hex, not base64,
/// to need no extra dependency; the bytes are the standard interchange format.
mod hist_hex {
    use super::*;
    use serde::de::Error as _;
    use serde::ser::Error as _;
    use std::fmt::Write as _;

    pub fn serialize<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(h, &mut bytes)
            .map_err(|e| S::Error::custom(format!("histogram serialization: {e:?}")))?;
        let mut hex = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            write!(hex, "{b:02x}").expect("writing to a String cannot fail");
        }
        s.serialize_str(&hex)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let hex = String::deserialize(d)?;
        if hex.len() % 2 != 0 || !hex.is_ascii() {
            return Err(D::Error::custom(
                "histogram hex has an odd length or non-ASCII",
            ));
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(D::Error::custom)?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| D::Error::custom(format!("histogram deserialization: {e:?}")))?;
        // A deserialized histogram does not auto-resize; later merges need it to.
        h.auto(true);
        Ok(h)
    }
}
