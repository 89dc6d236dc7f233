//! The autotuner on the devices CI has (the interpreter, the emulator, lavapipe through both
//! runtimes): every candidate checked or pruned with its reason, the fastest right one cached,
//! later lookups served from the cache (for any problem of the bucket), and two processes tuning
//! one key into one cache.

use std::path::PathBuf;
use std::process::Command;

use tilekit::kernels::{self, Problem};
use tilekit::tune::{self, Lookup, Outcome, Source, TuneCache, TuneOptions};
use tilekit::{DType, Device};

/// Few, short timings: these tests check the tuner's bookkeeping, not speed.
fn quick() -> TuneOptions {
    TuneOptions { warmup: 1, min_runs: 2, min_time_s: 0.0, max_runs: 2, flush_bytes: 1 << 20, ..TuneOptions::default() }
}

fn scratch(name: &str) -> TuneCache {
    let dir = std::env::temp_dir().join(format!("tilekit-tune-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    TuneCache::at(dir)
}

/// lavapipe through the raw Vulkan runtime, or the emulator on a machine without it (said so).
fn gpu_or_emulator() -> Device {
    match Device::gpus().into_iter().find(|d| matches!(d, Device::Vulkan { .. })) {
        Some(d) => d,
        None if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") => {
            eprintln!("SKIPPED: Vulkan in tests/tune.rs (TILEKIT_SKIP_GPU_TESTS=1), the emulator instead");
            Device::find("emulator").unwrap()
        }
        None => panic!("no Vulkan device: install mesa-vulkan-drivers (lavapipe) or set TILEKIT_SKIP_GPU_TESTS=1"),
    }
}

#[test]
fn tunes_checks_prunes_and_caches() {
    let softmax = kernels::find("softmax").unwrap();
    // 4099 columns take an 8192-wide row: two warps would hold 128 elements per thread,
    // which the kernel refuses, so that candidate is pruned with the reason.
    let problem = Problem::new(&[3, 4099], DType::F32);
    let cache = scratch("softmax");
    for device in [gpu_or_emulator(), Device::Interpreter] {
        let mut events = 0;
        let tuned = tune::tune(&*softmax, &problem, &device, Some(&cache), &quick(), &mut |_| events += 1).unwrap();
        assert!(!tuned.from_cache);
        assert_eq!(events, 1 + tuned.candidates.len(), "{device}: one event to begin, one per candidate");
        assert_eq!(tuned.candidates.len(), softmax.configs().len());
        let pruned: Vec<_> = tuned.candidates.iter().filter(|c| matches!(c.outcome, Outcome::Pruned(_))).collect();
        assert!(
            pruned.iter().any(|c| c.config.get("num_warps") == Ok(2) && matches!(&c.outcome, Outcome::Pruned(r) if r.contains("per thread"))),
            "{device}: {pruned:?}"
        );
        let best = tuned
            .candidates
            .iter()
            .filter_map(|c| match c.outcome {
                Outcome::Timed { median_s, .. } => Some(median_s),
                _ => None,
            })
            .fold(f64::INFINITY, f64::min);
        assert_eq!(tuned.median_s, best, "{device}: the fastest right candidate");
        assert!(tuned.timed() >= 2, "{device}: {:?}", tuned.candidates);
        assert!(tuned.candidates.iter().all(|c| !matches!(c.outcome, Outcome::Wrong(_) | Outcome::Failed(_))), "{device}: {:?}", tuned.candidates);
        let stored = tuned.stored.clone().unwrap();
        assert!(stored.exists());

        // Again: from the cache, nothing timed.
        let again = tune::tune(&*softmax, &problem, &device, Some(&cache), &quick(), &mut |_| panic!("nothing to time")).unwrap();
        assert!(again.from_cache && again.config == tuned.config && again.candidates.is_empty());
        // A problem of the same bucket takes it; another bucket or device does not.
        let (config, source) = tune::tuned_config(&*softmax, &Problem::new(&[4, 5000], DType::F32), &device, Some(&cache));
        assert_eq!((config, source), (tuned.config.clone(), Source::Cached(stored)));
        let (_, source) = tune::tuned_config(&*softmax, &Problem::new(&[3, 4000], DType::F32), &device, Some(&cache));
        assert_eq!(source, Source::Default(None));
        let (_, source) = tune::tuned_config(&*softmax, &problem, &Device::find("emulator:lavapipe").unwrap(), Some(&cache));
        assert_eq!(source, Source::Default(None));
    }
    // A different driver is a different key: the entries of both devices stay side by side.
    assert_eq!(cache.clear().unwrap(), 2);
    let _ = std::fs::remove_dir_all(cache.dir());
}

#[test]
fn a_corrupt_entry_is_ignored_and_retuned() {
    let k = kernels::find("vector_add").unwrap();
    let problem = Problem::new(&[1001], DType::F32);
    let cache = scratch("corrupt");
    let device = Device::Interpreter;
    let key = tune::key(&*k, &problem, &device);
    std::fs::create_dir_all(cache.dir()).unwrap();
    std::fs::write(cache.path(&key), "{\"format\": 1, \"key\": {\"kern").unwrap();
    assert!(matches!(cache.lookup(&key), Lookup::Ignored { .. }));
    assert_eq!(tune::tuned_config(&*k, &problem, &device, Some(&cache)).1, Source::Default(None));
    let tuned = tune::tune(&*k, &problem, &device, Some(&cache), &quick(), &mut |_| {}).unwrap();
    assert!(!tuned.from_cache, "a corrupt entry is a miss");
    assert!(matches!(cache.lookup(&key), Lookup::Hit(e) if e.config == tuned.config.to_string()));
    let _ = std::fs::remove_dir_all(cache.dir());
}

/// The child's half of [`two_processes_tune_one_key`]: tunes into the cache the parent names.
#[test]
fn child_tunes_into_a_shared_cache() {
    let Ok(dir) = std::env::var("TILEKIT_TUNE_TEST_CACHE") else { return };
    let k = kernels::find("vector_add").unwrap();
    let cache = TuneCache::at(PathBuf::from(dir));
    let options = TuneOptions { retune: true, ..quick() };
    for _ in 0..3 {
        tune::tune(&*k, &Problem::new(&[1001], DType::F32), &Device::Interpreter, Some(&cache), &options, &mut |_| {}).unwrap();
    }
}

#[test]
fn two_processes_tune_one_key() {
    let cache = scratch("processes");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "child_tunes_into_a_shared_cache", "--test-threads", "1"])
                .env("TILEKIT_TUNE_TEST_CACHE", cache.dir())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let k = kernels::find("vector_add").unwrap();
    let key = tune::key(&*k, &Problem::new(&[1001], DType::F32), &Device::Interpreter);
    assert!(matches!(cache.lookup(&key), Lookup::Hit(_)), "{:?}", cache.lookup(&key));
    let files: Vec<_> = std::fs::read_dir(cache.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files.len(), 1, "one entry, no temporary file left: {files:?}");
    let _ = std::fs::remove_dir_all(cache.dir());
}
