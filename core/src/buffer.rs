//! Host-side typed buffers: what kernels read and write on the interpreter, and what runtimes
//! upload to and download from devices.
//!
//! Elements are stored in their device byte layout (little-endian; `i1` as one byte; f16/bf16 as
//! their 16-bit patterns), so a buffer's bytes go to a GPU unchanged. Every element access goes
//! through a relaxed atomic of the element's width: program instances of the interpreter run in
//! parallel and may race exactly as they would on a GPU, without that being undefined behaviour
//! in Rust. On x86-64 and AArch64 relaxed atomic loads and stores compile to plain moves.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

use half::{bf16, f16};

use crate::dtype::DType;

/// A buffer of `len` elements of one dtype.
pub struct HostBuffer {
    dtype: DType,
    len: usize,
    // u64 words give every element width its natural alignment.
    words: Box<[AtomicU64]>,
}

impl Clone for HostBuffer {
    fn clone(&self) -> Self {
        HostBuffer::from_bytes(self.dtype, &self.to_bytes()).expect("same dtype and length")
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuffer({} x {})", self.len, self.dtype)
    }
}

/// A byte string whose length is not a whole number of elements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{bytes} bytes are not a whole number of {dtype} elements ({size} bytes each)")]
pub struct BufferSizeError {
    pub bytes: usize,
    pub dtype: DType,
    pub size: usize,
}

/// Rust element types that map one-to-one to a [`DType`].
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: DType;
    fn to_bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
}

macro_rules! element {
    ($t:ty, $d:ident, |$x:ident| $to:expr, |$b:ident| $from:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn to_bits(self) -> u64 {
                let $x = self;
                $to
            }
            fn from_bits($b: u64) -> Self {
                $from
            }
        }
    };
}
element!(bool, I1, |x| x as u64, |b| b != 0);
element!(i8, I8, |x| x as u8 as u64, |b| b as u8 as i8);
element!(u8, U8, |x| x as u64, |b| b as u8);
element!(i16, I16, |x| x as u16 as u64, |b| b as u16 as i16);
element!(i32, I32, |x| x as u32 as u64, |b| b as u32 as i32);
element!(u32, U32, |x| x as u64, |b| b as u32);
element!(i64, I64, |x| x as u64, |b| b as i64);
element!(f16, F16, |x| x.to_bits() as u64, |b| f16::from_bits(b as u16));
element!(bf16, BF16, |x| x.to_bits() as u64, |b| bf16::from_bits(b as u16));
element!(f32, F32, |x| x.to_bits() as u64, |b| f32::from_bits(b as u32));

/// Converts an f64 to the element bits of `dtype`: floats round to nearest even, integers
/// truncate toward zero and saturate (NaN becomes 0), `i1` is `x != 0`.
pub fn f64_to_bits(dtype: DType, x: f64) -> u64 {
    match dtype {
        DType::I1 => (x != 0.0 && !x.is_nan()) as u64,
        DType::I8 => (x as i8) as u8 as u64,
        DType::U8 => (x as u8) as u64,
        DType::I16 => (x as i16) as u16 as u64,
        DType::I32 => (x as i32) as u32 as u64,
        DType::U32 => (x as u32) as u64,
        DType::I64 => (x as i64) as u64,
        DType::F16 => crate::dtype::f16_from_f64(x).to_bits() as u64,
        DType::BF16 => crate::dtype::bf16_from_f64(x).to_bits() as u64,
        DType::F32 => (x as f32).to_bits() as u64,
    }
}

/// Reads element bits of `dtype` as f64 (exact for every dtype but i64 beyond 2^53).
pub fn bits_to_f64(dtype: DType, b: u64) -> f64 {
    match dtype {
        DType::I1 => (b & 1) as f64,
        DType::I8 => b as u8 as i8 as f64,
        DType::U8 => b as u8 as f64,
        DType::I16 => b as u16 as i16 as f64,
        DType::I32 => b as u32 as i32 as f64,
        DType::U32 => b as u32 as f64,
        DType::I64 => b as i64 as f64,
        DType::F16 => f16::from_bits(b as u16).to_f64(),
        DType::BF16 => bf16::from_bits(b as u16).to_f64(),
        DType::F32 => f32::from_bits(b as u32) as f64,
    }
}

impl HostBuffer {
    /// `len` elements, all bits zero.
    pub fn zeros(dtype: DType, len: usize) -> HostBuffer {
        let nwords = (len * dtype.size_bytes()).div_ceil(8);
        let words = (0..nwords).map(|_| AtomicU64::new(0)).collect();
        HostBuffer { dtype, len, words }
    }

    /// Converts each value with [`f64_to_bits`].
    pub fn from_f64(dtype: DType, values: &[f64]) -> HostBuffer {
        use rayon::prelude::*;
        let b = HostBuffer::zeros(dtype, values.len());
        // Element stores are atomics, so threads writing neighbours in one word do not race.
        values.par_iter().with_min_len(1 << 14).enumerate().for_each(|(i, &x)| b.store_bits(i, f64_to_bits(dtype, x)));
        b
    }

    pub fn from_slice<T: Element>(values: &[T]) -> HostBuffer {
        let b = HostBuffer::zeros(T::DTYPE, values.len());
        for (i, &x) in values.iter().enumerate() {
            b.store_bits(i, x.to_bits());
        }
        b
    }

    /// From the device byte layout.
    pub fn from_bytes(dtype: DType, bytes: &[u8]) -> Result<HostBuffer, BufferSizeError> {
        let size = dtype.size_bytes();
        if bytes.len() % size != 0 {
            return Err(BufferSizeError { bytes: bytes.len(), dtype, size });
        }
        let b = HostBuffer::zeros(dtype, bytes.len() / size);
        // Whole words at a time: the word storage is the device layout, little-endian.
        for (w, chunk) in b.words.iter().zip(bytes.chunks(8)) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            w.store(u64::from_le_bytes(word), Ordering::Relaxed);
        }
        Ok(b)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes in the device layout.
    pub fn size_bytes(&self) -> usize {
        self.len * self.dtype.size_bytes()
    }

    /// The device byte layout.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.words.len() * 8);
        for w in self.words.iter() {
            out.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        out.truncate(self.size_bytes());
        out
    }

    /// Overwrites every element with `src`'s; `false` (and nothing written) when the dtypes or
    /// lengths differ.
    pub fn copy_from(&self, src: &HostBuffer) -> bool {
        if src.dtype != self.dtype || src.len != self.len {
            return false;
        }
        for (d, s) in self.words.iter().zip(src.words.iter()) {
            d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        true
    }

    pub fn to_f64(&self) -> Vec<f64> {
        use rayon::prelude::*;
        // Checking large outputs converts hundreds of millions of elements: use every core.
        (0..self.len).into_par_iter().with_min_len(1 << 14).map(|i| bits_to_f64(self.dtype, self.load_bits(i))).collect()
    }

    /// The elements as `T`, or `None` when `T` is not this buffer's dtype.
    pub fn to_vec<T: Element>(&self) -> Option<Vec<T>> {
        (T::DTYPE == self.dtype).then(|| (0..self.len).map(|i| T::from_bits(self.load_bits(i))).collect())
    }

    /// Fills every element with the same bit pattern (used to poison outputs before a run, so an
    /// element a kernel forgot to write cannot pass for a right answer).
    pub fn fill_bits(&self, bits: u64) {
        let size = self.dtype.size_bytes();
        let per_word = 8 / size;
        let whole = self.len / per_word;
        let mut pattern = 0u64;
        for k in 0..per_word {
            pattern |= (bits & (u64::MAX >> (64 - 8 * size as u32))) << (8 * size * k);
        }
        for w in &self.words[..whole] {
            w.store(pattern, Ordering::Relaxed);
        }
        for i in whole * per_word..self.len {
            self.store_bits(i, bits);
        }
    }

    fn ptr(&self, i: usize) -> *const u8 {
        debug_assert!(i < self.len);
        // In bounds: i < len and the word storage covers len * size bytes.
        unsafe { (self.words.as_ptr() as *const u8).add(i * self.dtype.size_bytes()) }
    }

    /// Element `i`'s bits, zero-extended. Panics if `i >= len` (callers check bounds first and
    /// report them as errors).
    pub fn load_bits(&self, i: usize) -> u64 {
        assert!(i < self.len, "element {i} out of bounds of {} elements", self.len);
        let p = self.ptr(i);
        // SAFETY: p is in bounds and aligned for the element width (words are 8-aligned and
        // element offsets are multiples of the element size); the storage is made of atomics.
        unsafe {
            match self.dtype.size_bytes() {
                1 => (*(p as *const AtomicU8)).load(Ordering::Relaxed) as u64,
                2 => (*(p as *const AtomicU16)).load(Ordering::Relaxed) as u64,
                4 => (*(p as *const AtomicU32)).load(Ordering::Relaxed) as u64,
                _ => (*(p as *const AtomicU64)).load(Ordering::Relaxed),
            }
        }
    }

    /// Writes element `i`'s bits (truncated to the element width).
    pub fn store_bits(&self, i: usize, bits: u64) {
        assert!(i < self.len, "element {i} out of bounds of {} elements", self.len);
        let p = self.ptr(i);
        // SAFETY: as in load_bits.
        unsafe {
            match self.dtype.size_bytes() {
                1 => (*(p as *const AtomicU8)).store(bits as u8, Ordering::Relaxed),
                2 => (*(p as *const AtomicU16)).store(bits as u16, Ordering::Relaxed),
                4 => (*(p as *const AtomicU32)).store(bits as u32, Ordering::Relaxed),
                _ => (*(p as *const AtomicU64)).store(bits, Ordering::Relaxed),
            }
        }
    }

    /// Atomically replaces element `i` by `f(old)`; returns the old bits.
    pub fn atomic_update_bits(&self, i: usize, mut f: impl FnMut(u64) -> u64) -> u64 {
        assert!(i < self.len, "element {i} out of bounds of {} elements", self.len);
        let p = self.ptr(i);
        // SAFETY: as in load_bits.
        unsafe {
            match self.dtype.size_bytes() {
                1 => (*(p as *const AtomicU8)).fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| Some(f(o as u64) as u8)).unwrap_or_else(|o| o)
                    as u64,
                2 => (*(p as *const AtomicU16)).fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| Some(f(o as u64) as u16)).unwrap_or_else(|o| o)
                    as u64,
                4 => (*(p as *const AtomicU32)).fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| Some(f(o as u64) as u32)).unwrap_or_else(|o| o)
                    as u64,
                _ => (*(p as *const AtomicU64)).fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| Some(f(o))).unwrap_or_else(|o| o),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole-word paths (bytes, fill, copy) agree with element access for every width and
    /// for lengths that end inside a word.
    #[test]
    fn word_paths_match_element_access() {
        for dtype in [DType::I8, DType::F16, DType::F32, DType::I64] {
            for len in [0usize, 1, 3, 7, 8, 9, 17] {
                let size = dtype.size_bytes();
                let bytes: Vec<u8> = (0..len * size).map(|i| (i * 37 + 11) as u8).collect();
                let b = HostBuffer::from_bytes(dtype, &bytes).unwrap();
                assert_eq!(b.to_bytes(), bytes, "{dtype} x {len}");
                for i in 0..len {
                    let mut w = [0u8; 8];
                    w[..size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
                    assert_eq!(b.load_bits(i), u64::from_le_bytes(w));
                }
                let c = HostBuffer::zeros(dtype, len);
                assert!(c.copy_from(&b));
                assert_eq!(c.to_bytes(), bytes);
                assert!(!c.copy_from(&HostBuffer::zeros(dtype, len + 1)));
                c.fill_bits(0x7FC0_0001_A5A5);
                let mask = u64::MAX >> (64 - 8 * size as u32);
                assert!((0..len).all(|i| c.load_bits(i) == 0x7FC0_0001_A5A5 & mask), "{dtype} x {len}");
                let vals: Vec<f64> = (0..len).map(|i| i as f64 - 2.5).collect();
                let f = HostBuffer::from_f64(dtype, &vals);
                assert!(f.to_f64().iter().zip(&vals).all(|(a, v)| *a == bits_to_f64(dtype, f64_to_bits(dtype, *v))));
            }
        }
    }
}
