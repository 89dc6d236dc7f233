//! Counts of the data a runtime moves between the host and a device, so that a caller (and a
//! test) can tell that a chain of launches on device buffers moves nothing through the host.

use std::sync::atomic::{AtomicU64, Ordering};

/// Host <-> device copies made so far: each upload or download is one copy, whatever its size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    pub uploads: u64,
    pub downloads: u64,
    pub bytes_uploaded: u64,
    pub bytes_downloaded: u64,
}

impl Transfers {
    /// Copies in either direction.
    pub fn copies(&self) -> u64 {
        self.uploads + self.downloads
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Transfers) -> Transfers {
        Transfers {
            uploads: self.uploads - earlier.uploads,
            downloads: self.downloads - earlier.downloads,
            bytes_uploaded: self.bytes_uploaded - earlier.bytes_uploaded,
            bytes_downloaded: self.bytes_downloaded - earlier.bytes_downloaded,
        }
    }
}

/// The counters a runtime keeps; shared by every thread that uses the runtime.
#[derive(Debug, Default)]
pub struct TransferCounter {
    uploads: AtomicU64,
    downloads: AtomicU64,
    bytes_uploaded: AtomicU64,
    bytes_downloaded: AtomicU64,
}

impl TransferCounter {
    pub fn upload(&self, bytes: usize) {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        self.bytes_uploaded.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn download(&self, bytes: usize) {
        self.downloads.fetch_add(1, Ordering::Relaxed);
        self.bytes_downloaded.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn get(&self) -> Transfers {
        Transfers {
            uploads: self.uploads.load(Ordering::Relaxed),
            downloads: self.downloads.load(Ordering::Relaxed),
            bytes_uploaded: self.bytes_uploaded.load(Ordering::Relaxed),
            bytes_downloaded: self.bytes_downloaded.load(Ordering::Relaxed),
        }
    }
}
