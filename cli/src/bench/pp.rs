//! The performance-portability metric (Pennycook, Sewall and Lee, "A Metric for Performance
//! Portability", 2016) and its cascade (Sewall, Pennycook et al., "Interpreting and Visualizing
//! Performance Portability Metrics", 2020).
//!
//! For an application `a` solving problem `p` on a set of platforms `H`:
//!
//! ```text
//! PP(a, p, H) = |H| / Σ_{i∈H} 1 / e_i(a, p)   if a runs correctly on every i ∈ H
//!             = 0                               otherwise
//! ```
//!
//! the harmonic mean of the per-platform efficiencies. A platform the application does not
//! support (it failed, gave a wrong answer or was not run) makes the whole set 0: the metric is
//! about the set, and one missing platform means the code is not portable across it.

/// The metric over per-platform efficiencies, `None` meaning the platform is unsupported.
/// Returns `None` for an empty platform set (there is nothing to be portable across).
pub fn pp(efficiencies: &[Option<f64>]) -> Option<f64> {
    if efficiencies.is_empty() {
        return None;
    }
    let mut inv = 0.0;
    for e in efficiencies {
        match e {
            Some(e) if *e > 0.0 && e.is_finite() => inv += 1.0 / e,
            // Unsupported, or an efficiency of zero (which the harmonic mean sends to 0 too).
            _ => return Some(0.0),
        }
    }
    Some(efficiencies.len() as f64 / inv)
}

/// One step of a cascade: the platforms sorted from most to least efficient, and the metric
/// over the first `k` of them.
#[derive(Clone, Debug, PartialEq)]
pub struct CascadeStep {
    pub platform: String,
    /// This platform's efficiency (`None`: unsupported).
    pub efficiency: Option<f64>,
    /// PP over this platform and every one before it.
    pub pp: f64,
}

/// The cascade of one application: platforms in decreasing efficiency (unsupported ones last,
/// in the order given), each with the PP of the set up to and including it. Its last step's `pp`
/// is the PP over the whole set.
pub fn cascade(platforms: &[(String, Option<f64>)]) -> Vec<CascadeStep> {
    let mut sorted: Vec<&(String, Option<f64>)> = platforms.iter().collect();
    // A stable sort: ties and unsupported platforms keep the caller's order.
    sorted.sort_by(|a, b| match (a.1, b.1) {
        (Some(x), Some(y)) => y.total_cmp(&x),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    let mut seen = Vec::new();
    sorted
        .into_iter()
        .map(|(name, e)| {
            seen.push(*e);
            CascadeStep { platform: name.clone(), efficiency: *e, pp: pp(&seen).unwrap_or(0.0) }
        })
        .collect()
}

/// One efficiency per platform for an application over several problems: the harmonic mean of
/// its per-problem efficiencies (so the same 0-on-unsupported rule holds per problem).
pub fn over_problems(efficiencies: &[Option<f64>]) -> Option<f64> {
    match pp(efficiencies) {
        Some(e) if e > 0.0 => Some(e),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn harmonic_mean_checked_by_hand() {
        // 2 / (1/0.5 + 1/1.0) = 2 / 3.
        assert!(close(pp(&[Some(0.5), Some(1.0)]).unwrap(), 2.0 / 3.0));
        // 3 / (1/0.2 + 1/0.4 + 1/0.8) = 3 / 8.75.
        assert!(close(pp(&[Some(0.2), Some(0.4), Some(0.8)]).unwrap(), 3.0 / 8.75));
        // One platform: its own efficiency.
        assert!(close(pp(&[Some(0.37)]).unwrap(), 0.37));
        // Equal efficiencies: that efficiency.
        assert!(close(pp(&[Some(0.6); 5]).unwrap(), 0.6));
    }

    #[test]
    fn the_harmonic_mean_punishes_the_weakest_platform() {
        // The arithmetic mean of 0.9 and 0.1 is 0.5; the metric is 2 / (1/0.9 + 10) = 0.18.
        let v = pp(&[Some(0.9), Some(0.1)]).unwrap();
        assert!(close(v, 2.0 / (1.0 / 0.9 + 10.0)));
        assert!(v < 0.2);
    }

    #[test]
    fn any_unsupported_platform_makes_it_zero() {
        assert_eq!(pp(&[Some(1.0), None]), Some(0.0));
        assert_eq!(pp(&[None]), Some(0.0));
        assert_eq!(pp(&[Some(0.8), Some(0.0), Some(0.9)]), Some(0.0));
        assert_eq!(pp(&[]), None);
    }

    #[test]
    fn cascade_sorts_and_accumulates() {
        let c = cascade(&[("b".into(), Some(0.4)), ("x".into(), None), ("a".into(), Some(0.8)), ("c".into(), Some(0.2))]);
        let names: Vec<&str> = c.iter().map(|s| s.platform.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "x"]);
        assert!(close(c[0].pp, 0.8));
        // 2 / (1.25 + 2.5) = 0.5333...
        assert!(close(c[1].pp, 2.0 / 3.75));
        // 3 / (1.25 + 2.5 + 5) = 3 / 8.75.
        assert!(close(c[2].pp, 3.0 / 8.75));
        assert_eq!(c[3].pp, 0.0);
        // The PP of a cascade never rises as less efficient platforms join.
        assert!(c.windows(2).all(|w| w[1].pp <= w[0].pp));
    }

    #[test]
    fn problems_combine_harmonically() {
        assert!(close(over_problems(&[Some(0.5), Some(1.0)]).unwrap(), 2.0 / 3.0));
        assert_eq!(over_problems(&[Some(0.5), None]), None);
    }
}
