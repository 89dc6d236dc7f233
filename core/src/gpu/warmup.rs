//! The warm-up every runtime does before timed runs.

use std::time::{Duration, Instant};

/// Back-to-back work before timed runs. An idle GPU sits at its idle clocks (345 MHz on the
/// H200) and needs tens of milliseconds of sustained load to reach its working ones; runs timed
/// before that measure the clock ramp, not the kernel.
pub const WARMUP_TIME: Duration = Duration::from_millis(200);

/// Runs `submit(n)` (n launches back to back, waited for) until at least `min_runs` launches and
/// [`WARMUP_TIME`] have passed. The first submission holds one launch; later ones grow toward
/// ~20 ms each. Returns the mean wall time of one launch, in seconds.
pub fn warm_up<E>(min_runs: usize, mut submit: impl FnMut(usize) -> Result<(), E>) -> Result<f64, E> {
    let start = Instant::now();
    let (mut batch, mut done) = (1usize, 0usize);
    while done < min_runs || start.elapsed() < WARMUP_TIME {
        let t = Instant::now();
        submit(batch)?;
        done += batch;
        let per_run = t.elapsed().as_secs_f64() / batch as f64;
        batch = ((0.02 / per_run.max(1e-7)) as usize).clamp(1, 1024);
    }
    Ok(start.elapsed().as_secs_f64() / done.max(1) as f64)
}
