//! Every program the kernel library builds survives the text form: for every kernel, dtype, the
//! first test problems and every configuration, `parse(print(p)) == p` and printing is a fixed
//! point. Kernels added later are covered without touching this file.

use tilekit::kernels;
use tilekit::text::{parse, print, print_with, PrintOptions};

#[test]
fn every_library_program_round_trips() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for kernel in kernels::all() {
        let name = kernel.name();
        let mut planned = 0;
        let mut plan_errors = Vec::new();
        for &dtype in kernel.dtypes() {
            for problem in kernel.test_problems(dtype).iter().take(2) {
                for config in kernel.configs() {
                    let plan = match kernel.plan(problem, &config) {
                        Ok(plan) => plan,
                        // A configuration may not fit a problem; that is the kernel's business.
                        Err(e) => {
                            plan_errors.push(format!("{problem} [{config}]: {e}"));
                            continue;
                        }
                    };
                    planned += 1;
                    for (li, launch) in plan.launches.iter().enumerate() {
                        let p = &launch.program;
                        let what = format!("{name} {problem} [{config}] launch {li} (`{}`)", p.name);
                        let text = print(p);
                        match parse(&text) {
                            Ok(back) if &back == p => {
                                if print(&back) != text {
                                    failures.push(format!("{what}: printing is not a fixed point"));
                                }
                            }
                            Ok(_) => failures.push(format!("{what}: the parsed program differs\n{text}")),
                            Err(e) => failures.push(format!("{what}: the printed program does not parse: {e}\n{text}")),
                        }
                        // The short form (no locations) parses too.
                        if let Err(e) = parse(&print_with(p, &PrintOptions { locations: false })) {
                            failures.push(format!("{what}: the form without locations does not parse: {e}"));
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(planned > 0, "{name}: no configuration planned any test problem:\n{}", plan_errors.join("\n"));
    }
    assert!(failures.is_empty(), "{} programs failed the round trip:\n{}", failures.len(), failures.join("\n\n"));
    assert!(checked > 0);
    eprintln!("{checked} library programs round-trip");
}
