//! Order statistics of timing samples.
//!
//! Percentiles interpolate linearly between the two nearest order statistics (the definition
//! NumPy uses by default), so the median of an even count is the mean of the middle two and a
//! summary of the same samples is the same on every machine.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Summary of a set of samples (seconds per run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub runs: usize,
    pub median_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    pub mean_s: f64,
    pub p10_s: f64,
    pub p90_s: f64,
    /// Sample standard deviation (n - 1 in the denominator; 0 for one sample).
    pub stddev_s: f64,
}

/// The `p`-quantile (`0 <= p <= 1`) of `sorted` (ascending, non-empty), by linear interpolation.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let p = p.clamp(0.0, 1.0);
    let pos = p * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Summarises `samples`; `None` when there are none or any is not finite (a broken timer must
/// not turn into a plausible number).
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let mean = sorted.iter().sum::<f64>() / n as f64;
    let var = if n > 1 { sorted.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
    Some(Summary {
        runs: n,
        median_s: quantile(&sorted, 0.5),
        min_s: sorted[0],
        max_s: sorted[n - 1],
        mean_s: mean,
        p10_s: quantile(&sorted, 0.1),
        p90_s: quantile(&sorted, 0.9),
        stddev_s: var.sqrt(),
    })
}

/// How many timed runs the protocol asks for after `first` runs took `spent` seconds in total:
/// at least `min_runs` and at least enough to fill `min_time_s`, never more than `max_runs`.
pub fn runs_needed(first: usize, spent: f64, min_runs: usize, min_time_s: f64, max_runs: usize) -> usize {
    if first == 0 || spent <= 0.0 || !spent.is_finite() {
        return min_runs.min(max_runs).max(first);
    }
    let per_run = spent / first as f64;
    let for_time = (min_time_s / per_run).ceil() as usize;
    min_runs.max(for_time).min(max_runs).max(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_between_order_statistics() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&s, 0.5), 2.5);
        assert_eq!(quantile(&s, 0.0), 1.0);
        assert_eq!(quantile(&s, 1.0), 4.0);
        // Position 0.1 * 3 = 0.3: 1 + 0.3 * (2 - 1).
        assert!((quantile(&s, 0.1) - 1.3).abs() < 1e-12);
        assert!((quantile(&s, 0.9) - 3.7).abs() < 1e-12);
    }

    #[test]
    fn summary_of_unsorted_samples() {
        // 11 samples: 0..=10 shuffled; the median is 5, p10 is 1, p90 is 9.
        let s = [7.0, 3.0, 10.0, 0.0, 5.0, 1.0, 9.0, 2.0, 8.0, 4.0, 6.0];
        let m = summarize(&s).unwrap();
        assert_eq!((m.runs, m.median_s, m.min_s, m.max_s, m.mean_s), (11, 5.0, 0.0, 10.0, 5.0));
        assert_eq!((m.p10_s, m.p90_s), (1.0, 9.0));
        // Sample variance of 0..=10 is 11 (sum of squares 110 over 10).
        assert!((m.stddev_s - 11f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn one_sample_and_bad_samples() {
        let m = summarize(&[2e-6]).unwrap();
        assert_eq!((m.median_s, m.p10_s, m.p90_s, m.stddev_s), (2e-6, 2e-6, 2e-6, 0.0));
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN]).is_none());
        assert!(summarize(&[1.0, f64::INFINITY]).is_none());
    }

    #[test]
    fn run_count_fills_the_time_budget() {
        // 30 runs of 1 ms: 100 ms needs 100 runs.
        assert_eq!(runs_needed(30, 0.030, 30, 0.1, 10_000), 100);
        // Slow kernels stop at the minimum count.
        assert_eq!(runs_needed(30, 3.0, 30, 0.1, 10_000), 30);
        // Tiny kernels are capped.
        assert_eq!(runs_needed(30, 30e-6, 30, 0.1, 2000), 2000);
        // Never fewer than already taken.
        assert_eq!(runs_needed(50, 5.0, 30, 0.1, 40), 50);
    }
}
