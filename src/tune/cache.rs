//! The on-disk tuning cache: one JSON file per key, written atomically.
//!
//! A key names everything a tuned configuration depends on: the kernel, a hash of the programs
//! it builds, the problem's bucket, the device, its driver and the tilekit version. Each key has
//! a file of its own (its name carries a hash of the key, the file the whole key), so tuners of
//! different keys never touch each other's files, and two tuners of one key each replace the
//! file whole (a temporary file renamed over it): a reader sees one entry or the other, never a
//! mix. A file that does not parse, is cut short, comes from another format version or holds
//! another key is reported once per process and ignored: a lookup then misses, it never
//! returns a configuration that was not tuned for the key.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The cache file format this tilekit reads and writes.
pub const FORMAT: u32 = 1;

/// What a tuned configuration is valid for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TuneKey {
    pub kernel: String,
    /// Hash of the text of every program the kernel builds for its candidate configurations
    /// (on its default problem in the key's dtype): an edit of the kernel changes it.
    pub programs: String,
    /// The problem's bucket: dtype, options and each dimension rounded up to a power of two
    /// (`1024x16384 f16 causal=1` for 1000x12800), as Triton's autotuner keys on its `key`.
    pub problem: String,
    /// The device's name as [`crate::Device::name`] prints it.
    pub device: String,
    /// The driver and its version (a driver update re-tunes).
    pub driver: String,
    pub tilekit: String,
}

impl TuneKey {
    /// File name of the key's entry: the kernel's name (for people listing the folder) and a
    /// 128-bit hash of the whole key.
    pub fn file_name(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let safe: String = self.kernel.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
        format!("{safe}-{}.json", hash_hex(text.as_bytes()))
    }
}

/// How a cached configuration was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Every candidate that planned was checked and timed.
    Exhaustive,
    /// Only the candidates a cost model ranked first were timed.
    Model,
}

/// One tuned configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    pub format: u32,
    pub key: TuneKey,
    /// The configuration, as `Config`'s text form (`BLOCK=1024,num_warps=4`).
    pub config: String,
    /// The exact problem it was tuned on (the key has its bucket).
    pub tuned_on: String,
    /// Median device time of the chosen configuration, seconds.
    pub median_s: f64,
    /// Configurations timed, of `candidates` in the kernel's list.
    pub timed: usize,
    pub candidates: usize,
    pub strategy: Strategy,
    /// Seconds since the Unix epoch when it was written.
    pub written: u64,
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    Hit(CacheEntry),
    Miss,
    /// A file for the key exists but cannot be trusted; it is treated as a miss.
    Ignored {
        path: PathBuf,
        reason: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("tuning cache {path}: {what}: {source}")]
    Io { path: PathBuf, what: &'static str, source: std::io::Error },
}

/// A folder of tuned configurations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TuneCache {
    dir: PathBuf,
}

/// Files already reported as ignored by this process (each is reported once).
static REPORTED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

impl TuneCache {
    /// The cache in `dir` (created on the first store).
    pub fn at(dir: impl Into<PathBuf>) -> TuneCache {
        TuneCache { dir: dir.into() }
    }

    /// The user's cache: `$TILEKIT_CACHE_DIR/tune`, else `$XDG_CACHE_HOME/tilekit/tune`, else
    /// `$HOME/.cache/tilekit/tune`; `None` when none of them is set.
    pub fn user() -> Option<TuneCache> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let base = var("TILEKIT_CACHE_DIR")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("tilekit")))
            .or_else(|| var("HOME").map(|d| d.join(".cache").join("tilekit")))?;
        Some(TuneCache::at(base.join("tune")))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, key: &TuneKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// The entry for `key`, or why the file there was not used.
    pub fn lookup(&self, key: &TuneKey) -> Lookup {
        let path = self.path(key);
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return Lookup::Ignored { path, reason: format!("cannot be read ({e})") },
        };
        // The format is read on its own first, so a file of another version says so rather
        // than failing on a field it names differently.
        #[derive(Deserialize)]
        struct Version {
            format: u32,
        }
        let version = match serde_json::from_slice::<Version>(&text) {
            Ok(v) => v.format,
            Err(e) => return Lookup::Ignored { path, reason: format!("not a tuning cache entry ({e})") },
        };
        if version != FORMAT {
            return Lookup::Ignored { path, reason: format!("written in format {version}; this tilekit reads format {FORMAT}") };
        }
        let entry: CacheEntry = match serde_json::from_slice(&text) {
            Ok(e) => e,
            Err(e) => return Lookup::Ignored { path, reason: format!("not a tuning cache entry ({e})") },
        };
        if entry.key != *key {
            // Another key with the same hash: not ours, whatever it holds.
            return Lookup::Ignored { path, reason: "holds another key".into() };
        }
        if entry.config.parse::<tilekit_core::Config>().is_err() || !entry.median_s.is_finite() {
            return Lookup::Ignored { path, reason: format!("holds an invalid configuration `{}`", entry.config) };
        }
        Lookup::Hit(entry)
    }

    /// The entry for `key`; a file that cannot be used is reported on stderr (once per file and
    /// process) and counts as a miss.
    pub fn get(&self, key: &TuneKey) -> Option<CacheEntry> {
        match self.lookup(key) {
            Lookup::Hit(e) => Some(e),
            Lookup::Miss => None,
            Lookup::Ignored { path, reason } => {
                let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
                if reported.get_or_insert_with(HashSet::new).insert(path.clone()) {
                    eprintln!("tilekit: ignoring tuning cache file {}: {reason}", path.display());
                }
                None
            }
        }
    }

    /// Writes `entry` under its key: to a temporary file in the same folder, flushed to disk,
    /// then renamed over the entry's file, so that no reader ever sees part of it.
    pub fn store(&self, entry: &CacheEntry) -> Result<PathBuf, CacheError> {
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| CacheError::Io { path, what, source }
        };
        fs::create_dir_all(&self.dir).map_err(io("creating the folder", &self.dir))?;
        let path = self.path(&entry.key);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let tmp = self.dir.join(format!(".{}.{}.{nanos}.tmp", entry.key.file_name(), std::process::id()));
        let text = serde_json::to_vec_pretty(entry).expect("a cache entry serialises");
        let written = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&text)?;
            f.write_all(b"\n")?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io("writing a temporary file", &tmp)(e));
        }
        if let Err(e) = fs::rename(&tmp, &path) {
            let _ = fs::remove_file(&tmp);
            return Err(io("renaming the temporary file over the entry", &path)(e));
        }
        Ok(path)
    }

    /// Removes every entry (and temporary file a killed tuner left); the number removed.
    pub fn clear(&self) -> Result<usize, CacheError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(source) => return Err(CacheError::Io { path: self.dir.clone(), what: "listing the folder", source }),
        };
        let mut n = 0;
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") || name.ends_with(".tmp") {
                fs::remove_file(&p).map_err(|source| CacheError::Io { path: p.clone(), what: "removing an entry", source })?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// 128 bits of two FNV-1a hashes (different offsets), as hex: file names and program hashes.
/// Not cryptographic; the file holds the whole key, so a collision is a miss, never a wrong hit.
pub fn hash_hex(bytes: &[u8]) -> String {
    let fnv = |mut h: u64| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    };
    format!("{:016x}{:016x}", fnv(0xcbf2_9ce4_8422_2325), fnv(0x6c62_272e_07bb_0142))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TuneKey {
        TuneKey {
            kernel: "softmax".into(),
            programs: "00ff".into(),
            problem: "1024x16384 f16".into(),
            device: "vulkan:llvmpipe".into(),
            driver: "llvmpipe Mesa 22.3.6".into(),
            tilekit: "0.1.0".into(),
        }
    }

    fn entry(config: &str) -> CacheEntry {
        CacheEntry {
            format: FORMAT,
            key: key(),
            config: config.into(),
            tuned_on: "1000x12800 f16".into(),
            median_s: 1e-3,
            timed: 3,
            candidates: 9,
            strategy: Strategy::Exhaustive,
            written: 0,
        }
    }

    fn scratch(name: &str) -> TuneCache {
        let dir = std::env::temp_dir().join(format!("tilekit-tune-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        TuneCache::at(dir)
    }

    #[test]
    fn round_trip_and_key_change() {
        let c = scratch("roundtrip");
        assert_eq!(c.lookup(&key()), Lookup::Miss);
        c.store(&entry("BLOCK=1024,num_warps=4")).unwrap();
        assert_eq!(c.get(&key()).unwrap().config, "BLOCK=1024,num_warps=4");
        let newer = TuneKey { driver: "llvmpipe Mesa 24.0".into(), ..key() };
        assert_eq!(c.lookup(&newer), Lookup::Miss, "a driver update misses");
        c.store(&entry("BLOCK=2048,num_warps=8")).unwrap();
        assert_eq!(c.get(&key()).unwrap().config, "BLOCK=2048,num_warps=8", "a store replaces");
        assert_eq!(c.clear().unwrap(), 1);
        let _ = fs::remove_dir_all(c.dir());
    }

    #[test]
    fn corrupt_truncated_and_foreign_files_are_ignored() {
        let c = scratch("corrupt");
        c.store(&entry("BLOCK=1024,num_warps=4")).unwrap();
        let path = c.path(&key());
        let good = fs::read_to_string(&path).unwrap();
        let cases = [
            (good[..good.len() / 2].to_string(), "not a tuning cache entry"),
            ("\u{0}\u{1}garbage".to_string(), "not a tuning cache entry"),
            (good.replace("\"format\": 1", "\"format\": 7"), "format 7"),
            (good.replace("softmax", "layernorm"), "another key"),
            (good.replace("BLOCK=1024,num_warps=4", "BLOCK=x"), "invalid configuration"),
            (String::new(), "not a tuning cache entry"),
        ];
        for (text, why) in cases {
            fs::write(&path, &text).unwrap();
            match c.lookup(&key()) {
                Lookup::Ignored { reason, .. } => assert!(reason.contains(why), "{reason} for {text:?}"),
                other => panic!("{other:?} for {text:?}"),
            }
            assert_eq!(c.get(&key()), None);
        }
        let _ = fs::remove_dir_all(c.dir());
    }

    #[test]
    fn concurrent_stores_of_one_key_leave_a_whole_entry() {
        let c = scratch("concurrent");
        let configs: Vec<String> = (0..4).map(|i| format!("BLOCK={},num_warps=4", 256 << i)).collect();
        std::thread::scope(|s| {
            for cfg in &configs {
                let c = c.clone();
                s.spawn(move || {
                    for _ in 0..50 {
                        c.store(&entry(cfg)).unwrap();
                        // Every read in between sees one writer's entry whole.
                        let got = c.lookup(&key());
                        assert!(matches!(&got, Lookup::Hit(e) if configs_contain(&e.config)), "{got:?}");
                    }
                });
            }
        });
        assert!(configs.contains(&c.get(&key()).unwrap().config));
        let leftovers = fs::read_dir(c.dir()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file stays");
        let _ = fs::remove_dir_all(c.dir());
    }

    fn configs_contain(config: &str) -> bool {
        (0..4).any(|i| config == format!("BLOCK={},num_warps=4", 256 << i))
    }

    #[test]
    fn file_names_differ_per_key_and_stay_plain() {
        let a = key().file_name();
        let b = TuneKey { problem: "2048x16384 f16".into(), ..key() };
        assert_ne!(a, b.file_name());
        let odd = TuneKey { kernel: "../x y".into(), ..key() };
        assert!(odd.file_name().starts_with("___x_y-"), "{}", odd.file_name());
        assert_eq!(hash_hex(b"").len(), 32);
    }
}
