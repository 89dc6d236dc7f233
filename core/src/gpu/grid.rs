//! Grid folding: launching a grid larger than the device's per-axis workgroup limit.
//!
//! Vulkan devices (and wgpu everywhere) may cap every grid axis at 65535 workgroups, while a
//! tile program's grid is whatever the problem needs (vector add of 2^28 elements in blocks of
//! 1024 is 262144 programs along axis 0). A kernel compiled with
//! [`LowerOptions::fold_grid`](crate::gpu::lower::LowerOptions::fold_grid) receives the logical
//! grid `[gx, gy, gz]` at launch and is dispatched over a *folded* shape `[X, Y, Z]` within the
//! limits, `X * Y * Z >= gx * gy * gz`. Each workgroup computes its linear index
//! `L = wg.x + wg.y * X + wg.z * X * Y`, returns at once when `L >= gx * gy * gz`, and otherwise
//! runs as program `(L % gx, (L / gx) % gy, L / (gx * gy))` of the logical grid, which is the
//! order the interpreter walks a grid in. Kernels compute in 32 bits: the total must fit a u32,
//! and since `X * Y * Z` may pass 2^32 (the last layer's idle workgroups), the test compares the
//! layer `wg.z` and the index within it, `wg.x + wg.y * X < X * Y`, never a wrapped `L`.
//!
//! Folding is chosen per launch, only when a grid does not fit ([`fits`]): kernels launched on
//! grids within the limits compile and run exactly as without it.

/// Why a grid cannot be launched even folded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error("grid {grid:?} has {total} programs; a folded launch numbers programs with 32-bit indices, so at most {} fit", u32::MAX)]
    TooManyPrograms { grid: [u32; 3], total: u64 },
    #[error("grid {grid:?} has {total} programs, more than a dispatch of at most {limit:?} workgroups holds")]
    DispatchTooLarge { grid: [u32; 3], total: u64, limit: [u32; 3] },
}

/// Whether `grid` can be dispatched as it is under the per-axis workgroup `limit`.
pub fn fits(grid: [u32; 3], limit: [u32; 3]) -> bool {
    grid.iter().zip(&limit).all(|(g, l)| g <= l)
}

/// Programs in `grid`.
pub fn total(grid: [u32; 3]) -> u64 {
    grid.iter().map(|&g| g as u64).product()
}

/// The workgroups to dispatch for a folded launch of `grid` under `limit`: `[X, Y, Z]` with
/// every extent within its limit, `X * Y * Z >= total` and as few idle workgroups as a row-major
/// fill gives (`X` as large as allowed, then `Y`, and fewer than `X + X * Z` idle ones). An empty
/// grid dispatches `[0, 1, 1]`, which runs nothing.
///
/// Fails when the grid has more programs than a u32 numbers, or than the limits hold.
pub fn fold_dispatch(grid: [u32; 3], limit: [u32; 3]) -> Result<[u32; 3], FoldError> {
    let total = total(grid);
    if total == 0 {
        return Ok([0, 1, 1]);
    }
    if total > u32::MAX as u64 {
        return Err(FoldError::TooManyPrograms { grid, total });
    }
    let [lx, ly, lz] = limit.map(|l| l.max(1) as u64);
    let x = total.min(lx);
    let rows = total.div_ceil(x);
    // Rows beyond Y's limit spill into Z; Y is then balanced over the Z layers so that the last
    // layer is nearly full.
    let z = rows.div_ceil(ly);
    if z > lz {
        return Err(FoldError::DispatchTooLarge { grid, total, limit });
    }
    let y = rows.div_ceil(z);
    Ok([x as u32, y as u32, z as u32])
}

/// The logical program a folded workgroup `wg` of a dispatch of `dispatch` workgroups runs, or
/// `None` when it is one of the idle ones: what a folded kernel computes, step by step in the
/// same wrapping 32-bit arithmetic, for tests and tools.
pub fn folded_program(wg: [u32; 3], dispatch: [u32; 3], grid: [u32; 3]) -> Option<[u32; 3]> {
    let [gx, gy, gz] = grid;
    let total = gx.wrapping_mul(gy).wrapping_mul(gz);
    let layer = dispatch[0].wrapping_mul(dispatch[1]);
    let inner = wg[0].wrapping_add(wg[1].wrapping_mul(dispatch[0]));
    let (full_layers, rest) = (total.checked_div(layer)?, total % layer);
    if wg[2] > full_layers || (wg[2] == full_layers && inner >= rest) {
        return None;
    }
    let l = inner.wrapping_add(wg[2].wrapping_mul(layer));
    Some([l % gx, (l / gx) % gy, l / gx.wrapping_mul(gy)])
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: [u32; 3] = [65535, 65535, 65535];

    /// Every dispatch covers the grid and stays within its limits.
    fn check(grid: [u32; 3], limit: [u32; 3]) -> [u32; 3] {
        let d = fold_dispatch(grid, limit).unwrap_or_else(|e| panic!("{grid:?} under {limit:?}: {e}"));
        assert!(fits(d, limit), "{grid:?} under {limit:?} dispatches {d:?}");
        let n = total(d);
        assert!(n >= total(grid), "{grid:?}: {d:?} covers {n} programs");
        // Idle workgroups stay below one X row per Z layer plus one row.
        assert!(n - total(grid) < d[0] as u64 * (d[2] as u64 + 1), "{grid:?}: {d:?} wastes {}", n - total(grid));
        d
    }

    #[test]
    fn dispatch_shapes_at_the_edges() {
        assert_eq!(check([65535, 1, 1], L), [65535, 1, 1]);
        assert_eq!(check([65536, 1, 1], L), [65535, 2, 1]);
        assert_eq!(check([1, 1, 65536], L), [65535, 2, 1]);
        assert_eq!(check([1, 1, 1], L), [1, 1, 1]);
        assert_eq!(check([7, 1, 1], [7, 7, 7]), [7, 1, 1]);
        assert_eq!(check([8, 1, 1], [7, 7, 7]), [7, 2, 1]);
        // Primes: no extent divides the total, so the last row is ragged.
        assert_eq!(check([65537, 1, 1], L), [65535, 2, 1]);
        assert_eq!(check([131071, 1, 1], [1000, 1000, 1000]), [1000, 132, 1]);
        assert_eq!(check([13, 11, 1], [7, 7, 7]), [7, 7, 3]);
        // Exactly full: X * Y at the limits, then one more program opens a Z layer.
        assert_eq!(check([65535, 65535, 1], L), [65535, 65535, 1]);
        assert_eq!(check([65535, 65535, 1], [65535, 65535, 1]), [65535, 65535, 1]);
        assert_eq!(check([65535 * 65535 + 1, 1, 1], L), [65535, 32768, 2]);
        // The largest grid a u32 numbers: 65535 * 65538 workgroups, past 2^32 (see the module
        // doc for why the kernel's test cannot wrap).
        let big = [u32::MAX, 1, 1];
        let d = check(big, L);
        assert_eq!(d, [65535, 32769, 2]);
        // Its last program and the idle workgroups after it, whose linear index wraps.
        let last = (u32::MAX - 1) as u64 - 65535 * 32769;
        let (lx, ly) = ((last % 65535) as u32, (last / 65535) as u32);
        assert_eq!(folded_program([lx, ly, 1], d, big), Some([u32::MAX - 1, 0, 0]));
        assert_eq!((lx, ly), (65534, 32767));
        assert_eq!(folded_program([0, ly + 1, 1], d, big), None);
        assert_eq!(folded_program([65534, 32768, 1], d, big), None);
        assert_eq!(folded_program([65534, 32768, 0], d, big), Some([65535 * 32769 - 1, 0, 0]));
        check([65535, 65537, 1], L);
    }

    #[test]
    fn every_program_runs_exactly_once() {
        for grid in [[13, 11, 1], [5, 3, 7], [50, 1, 1], [1, 1, 49], [2, 25, 1], [7, 7, 1], [0, 3, 1]] {
            for limit in [[7, 7, 7], [3, 5, 7], [64, 1, 64], [65535; 3]] {
                let Ok(d) = fold_dispatch(grid, limit) else {
                    assert!(total(grid) > limit.iter().map(|&l| l as u64).product(), "{grid:?} under {limit:?}");
                    continue;
                };
                let mut seen = vec![0u32; total(grid) as usize];
                for z in 0..d[2] {
                    for y in 0..d[1] {
                        for x in 0..d[0] {
                            if let Some(p) = folded_program([x, y, z], d, grid) {
                                assert!(p.iter().zip(&grid).all(|(a, g)| a < g), "{grid:?}: {p:?}");
                                seen[(p[0] + p[1] * grid[0] + p[2] * grid[0] * grid[1]) as usize] += 1;
                            }
                        }
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "{grid:?} under {limit:?} via {d:?}: {seen:?}");
            }
        }
    }

    #[test]
    fn grids_that_cannot_launch_are_errors() {
        let e = fold_dispatch([65536, 65536, 1], L).unwrap_err();
        assert!(matches!(e, FoldError::TooManyPrograms { total, .. } if total == 1 << 32), "{e}");
        assert!(e.to_string().contains("4294967296"), "{e}");
        let e = fold_dispatch([8, 8, 8], [7, 7, 7]).unwrap_err();
        assert!(matches!(e, FoldError::DispatchTooLarge { total: 512, .. }), "{e}");
        assert!(e.to_string().contains("[7, 7, 7]"), "{e}");
        // A zero limit is treated as 1, never a division by zero.
        assert_eq!(fold_dispatch([3, 1, 1], [0, 5, 5]).unwrap(), [1, 3, 1]);
        assert_eq!(fold_dispatch([0, 9, 9], [1, 1, 1]).unwrap(), [0, 1, 1]);
        assert!(fits([0, 1, 1], [1, 1, 1]) && !fits([2, 1, 1], [1, 5, 5]));
    }
}
