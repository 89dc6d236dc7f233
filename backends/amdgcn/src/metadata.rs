//! The resources of a kernel, read from its code object: the `NT_AMDGPU_METADATA` note (a
//! MessagePack map, code object v3 and later) in the ELF file's note sections, and a static
//! occupancy estimate per architecture from those numbers.

use std::fmt;

use crate::amdgpu::Arch;
use crate::msgpack::{self, Value};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("the code object is not a 64-bit little-endian ELF file: {0}")]
    NotElf(String),
    #[error("the code object has no AMDGPU metadata note")]
    NoNote,
    #[error("the AMDGPU metadata note: {0}")]
    Decode(String),
    #[error("the AMDGPU metadata has no kernel `{0}`")]
    NoKernel(String),
    #[error("the metadata of kernel `{kernel}` lacks `{field}`")]
    Missing { kernel: String, field: &'static str },
}

/// One explicit or hidden kernel argument as the code object lays it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgInfo {
    /// Byte offset in the kernarg segment.
    pub offset: u32,
    pub size: u32,
    /// `global_buffer`, `by_value`, or a `hidden_*` kind.
    pub value_kind: String,
    /// The address space of a pointer argument (`global`), if any.
    pub address_space: Option<String>,
}

impl ArgInfo {
    pub fn hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

/// What the code object says about one kernel, with the occupancy it implies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObjectReport {
    pub arch: Arch,
    /// `amdhsa.target`, e.g. `amdgcn-amd-amdhsa--gfx942`.
    pub target: String,
    /// The code object version (`amdhsa.version`, [1, 2] for v5).
    pub version: (u32, u32),
    pub symbol: String,
    pub vgprs: u32,
    /// Accumulation registers (CDNA; 0 elsewhere), included in `vgprs` on CDNA.
    pub agprs: u32,
    pub sgprs: u32,
    pub vgpr_spills: u32,
    pub sgpr_spills: u32,
    /// Static LDS, bytes.
    pub lds_bytes: u32,
    /// Scratch (private segment) per work-item, bytes.
    pub scratch_bytes: u32,
    pub dynamic_stack: bool,
    pub wavefront_size: u32,
    pub max_flat_workgroup_size: u32,
    pub kernarg_bytes: u32,
    pub args: Vec<ArgInfo>,
    pub occupancy: Occupancy,
}

impl CodeObjectReport {
    pub fn spills(&self) -> bool {
        self.vgpr_spills > 0 || self.sgpr_spills > 0
    }

    /// The explicit (non-hidden) arguments, in order.
    pub fn explicit_args(&self) -> impl Iterator<Item = &ArgInfo> {
        self.args.iter().filter(|a| !a.hidden())
    }
}

impl fmt::Display for CodeObjectReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): wave{}, {} VGPRs, {} AGPRs, {} SGPRs, {} VGPR / {} SGPR spills, {} B LDS, {} B scratch, {} threads; {}",
            self.arch,
            crate::NOT_RUN,
            self.wavefront_size,
            self.vgprs,
            self.agprs,
            self.sgprs,
            self.vgpr_spills,
            self.sgpr_spills,
            self.lds_bytes,
            self.scratch_bytes,
            self.max_flat_workgroup_size,
            self.occupancy
        )
    }
}

/// A static occupancy estimate: waves resident per SIMD, and what limits them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Occupancy {
    pub waves_per_simd: u32,
    /// The architecture's maximum.
    pub max_waves_per_simd: u32,
    /// `vgprs`, `sgprs`, `lds`, `workgroup` or `hardware`.
    pub limited_by: &'static str,
}

impl fmt::Display for Occupancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "occupancy {}/{} waves per SIMD (limited by {})", self.waves_per_simd, self.max_waves_per_simd, self.limited_by)
    }
}

/// Register-file and LDS facts of one architecture, as LLVM's AMDGPU back end models them.
struct Limits {
    max_waves_per_simd: u32,
    /// VGPRs (unified with AGPRs on CDNA) per lane of one SIMD, and the allocation granule.
    vgpr_file: u32,
    vgpr_granule: u32,
    /// SGPRs per SIMD and granule; `None` where SGPRs never limit (RDNA gives each wave 106).
    sgpr_file: Option<(u32, u32)>,
    /// SIMDs sharing one LDS (a CU on CDNA, a WGP on RDNA) and that LDS's size.
    simds_per_lds: u32,
    lds_bytes: u32,
}

fn limits(arch: Arch) -> Limits {
    match arch {
        // CDNA2/3: 512 unified VGPRs+AGPRs per lane, granule 8; 800 SGPRs, granule 16; 8 waves
        // per SIMD; 4 SIMDs per CU sharing 64 KiB of LDS.
        Arch::Gfx90a | Arch::Gfx942 => {
            Limits { max_waves_per_simd: 8, vgpr_file: 512, vgpr_granule: 8, sgpr_file: Some((800, 16)), simds_per_lds: 4, lds_bytes: 64 * 1024 }
        }
        // RDNA3 (Navi 31) in wave32: 1536 VGPRs per lane, granule 24; 16 waves per SIMD; 4 SIMDs
        // per WGP sharing 128 KiB of LDS.
        Arch::Gfx1100 => {
            Limits { max_waves_per_simd: 16, vgpr_file: 1536, vgpr_granule: 24, sgpr_file: None, simds_per_lds: 4, lds_bytes: 128 * 1024 }
        }
    }
}

fn round_up(x: u32, g: u32) -> u32 {
    x.div_ceil(g.max(1)) * g.max(1)
}

/// Waves per SIMD a kernel with these resources can keep resident on `arch`.
pub fn occupancy(arch: Arch, vgprs: u32, agprs: u32, sgprs: u32, lds_bytes: u32, threads: u32) -> Occupancy {
    let l = limits(arch);
    let mut best = (l.max_waves_per_simd, "hardware");
    let mut limit = |w: u32, why: &'static str| {
        if w < best.0 {
            best = (w, why);
        }
    };
    // On CDNA the metadata's `.vgpr_count` already is the unified total (architectural VGPRs
    // rounded to 4, then the AGPRs), up to 512; `agprs` is the accumulation part of it.
    let _ = agprs;
    limit(l.vgpr_file / round_up(vgprs.max(1), l.vgpr_granule), "vgprs");
    if let Some((file, granule)) = l.sgpr_file {
        limit(file / round_up(sgprs.max(1), granule), "sgprs");
    }
    // Whole workgroups are resident on one LDS: waves of the workgroups that fit, spread over
    // its SIMDs.
    let waves_per_group = threads.div_ceil(arch.wave_size()).max(1);
    let groups_by_waves = (l.max_waves_per_simd * l.simds_per_lds) / waves_per_group;
    let groups = l.lds_bytes.checked_div(lds_bytes).map_or(groups_by_waves, |g| g.min(groups_by_waves));
    let by_groups = groups * waves_per_group / l.simds_per_lds;
    limit(by_groups, if lds_bytes > 0 && l.lds_bytes / lds_bytes < groups_by_waves { "lds" } else { "workgroup" });
    Occupancy { waves_per_simd: best.0, max_waves_per_simd: l.max_waves_per_simd, limited_by: best.1 }
}

/// The payloads of every ELF note named `AMDGPU` of type `NT_AMDGPU_METADATA` (32).
fn metadata_notes(elf: &[u8]) -> Result<Vec<&[u8]>, MetadataError> {
    let bad = |what: &str| MetadataError::NotElf(what.to_string());
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return Err(bad("bad header"));
    }
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| elf.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    let u64_at = |o: usize| elf.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
    let shoff = u64_at(0x28).ok_or_else(|| bad("no section table offset"))?;
    let shentsize = u16_at(0x3a).ok_or_else(|| bad("no section entry size"))?;
    let shnum = u16_at(0x3c).ok_or_else(|| bad("no section count"))?;
    let mut notes = Vec::new();
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        let kind = u32_at(sh + 4).ok_or_else(|| bad("section table out of bounds"))?;
        if kind != 7 {
            continue; // not SHT_NOTE
        }
        let (off, size) = (u64_at(sh + 0x18).ok_or_else(|| bad("section out of bounds"))?, u64_at(sh + 0x20).unwrap_or(0));
        let sec = elf.get(off..off.saturating_add(size)).ok_or_else(|| bad("note section out of bounds"))?;
        let mut at = 0;
        while at + 12 <= sec.len() {
            let rd = |o: usize| u32::from_le_bytes(sec[o..o + 4].try_into().unwrap()) as usize;
            let (namesz, descsz, ty) = (rd(at), rd(at + 4), rd(at + 8));
            let name_start = at + 12;
            let desc_start = name_start + round_up(namesz as u32, 4) as usize;
            let desc_end = desc_start + descsz;
            if desc_end > sec.len() {
                return Err(bad("note runs past its section"));
            }
            if &sec[name_start..name_start + namesz] == b"AMDGPU\0" && ty == 32 {
                notes.push(&sec[desc_start..desc_end]);
            }
            at = desc_start + round_up(descsz as u32, 4) as usize;
        }
    }
    Ok(notes)
}

/// Reads kernel `symbol`'s metadata (`symbol` is the entry name, the metadata's `.name`) from a
/// code object built for `arch`, and estimates its occupancy.
pub fn read(code_object: &[u8], symbol: &str, arch: Arch) -> Result<CodeObjectReport, MetadataError> {
    let notes = metadata_notes(code_object)?;
    let note = notes.first().ok_or(MetadataError::NoNote)?;
    let meta = msgpack::decode(note).map_err(MetadataError::Decode)?;
    let target = meta.get("amdhsa.target").and_then(Value::as_str).unwrap_or_default().to_string();
    let version = meta
        .get("amdhsa.version")
        .and_then(Value::as_array)
        .map(|v| (v.first().and_then(Value::as_int).unwrap_or(0) as u32, v.get(1).and_then(Value::as_int).unwrap_or(0) as u32))
        .unwrap_or((0, 0));
    let kernels = meta.get("amdhsa.kernels").and_then(Value::as_array).ok_or_else(|| MetadataError::Decode("no `amdhsa.kernels` list".into()))?;
    let k =
        kernels.iter().find(|k| k.get(".name").and_then(Value::as_str) == Some(symbol)).ok_or_else(|| MetadataError::NoKernel(symbol.to_string()))?;
    let num = |field: &'static str| -> Result<u32, MetadataError> {
        k.get(field).and_then(Value::as_int).and_then(|v| u32::try_from(v).ok()).ok_or(MetadataError::Missing { kernel: symbol.to_string(), field })
    };
    let opt = |field: &'static str| num(field).unwrap_or(0);
    let mut args = Vec::new();
    for a in k.get(".args").and_then(Value::as_array).unwrap_or(&[]) {
        let field = |f: &'static str| {
            a.get(f)
                .and_then(Value::as_int)
                .and_then(|v| u32::try_from(v).ok())
                .ok_or(MetadataError::Missing { kernel: symbol.to_string(), field: f })
        };
        args.push(ArgInfo {
            offset: field(".offset")?,
            size: field(".size")?,
            value_kind: a
                .get(".value_kind")
                .and_then(Value::as_str)
                .ok_or(MetadataError::Missing { kernel: symbol.to_string(), field: ".value_kind" })?
                .to_string(),
            address_space: a.get(".address_space").and_then(Value::as_str).map(str::to_string),
        });
    }
    let (vgprs, agprs, sgprs, lds_bytes) = (num(".vgpr_count")?, opt(".agpr_count"), num(".sgpr_count")?, num(".group_segment_fixed_size")?);
    let threads = num(".max_flat_workgroup_size")?;
    Ok(CodeObjectReport {
        arch,
        target,
        version,
        symbol: k.get(".symbol").and_then(Value::as_str).unwrap_or_default().to_string(),
        vgprs,
        agprs,
        sgprs,
        vgpr_spills: opt(".vgpr_spill_count"),
        sgpr_spills: opt(".sgpr_spill_count"),
        lds_bytes,
        scratch_bytes: num(".private_segment_fixed_size")?,
        dynamic_stack: matches!(k.get(".uses_dynamic_stack"), Some(Value::Bool(true))),
        wavefront_size: num(".wavefront_size")?,
        max_flat_workgroup_size: threads,
        kernarg_bytes: num(".kernarg_segment_size")?,
        args,
        occupancy: occupancy(arch, vgprs, agprs, sgprs, lds_bytes, threads),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occupancy_follows_each_limit() {
        // Few registers, no LDS: the hardware maximum.
        assert_eq!(occupancy(Arch::Gfx942, 16, 0, 16, 0, 256).waves_per_simd, 8);
        // 128 VGPRs: 512 / 128 = 4 waves.
        let o = occupancy(Arch::Gfx942, 128, 0, 16, 0, 256);
        assert_eq!((o.waves_per_simd, o.limited_by), (4, "vgprs"));
        // The unified count of CDNA: 200 -> 208 -> 2 waves; all 512 -> 1.
        assert_eq!(occupancy(Arch::Gfx90a, 200, 100, 16, 0, 256).waves_per_simd, 2);
        assert_eq!(occupancy(Arch::Gfx942, 512, 256, 16, 0, 256).waves_per_simd, 1);
        // 40 KiB of LDS: one 256-thread (4-wave) workgroup per CU -> 1 wave per SIMD.
        let o = occupancy(Arch::Gfx942, 16, 0, 16, 40 * 1024, 256);
        assert_eq!((o.waves_per_simd, o.limited_by), (1, "lds"));
        // RDNA3 wave32: 1536 / 96 = 16; 1536 / 192 = 8.
        assert_eq!(occupancy(Arch::Gfx1100, 96, 0, 100, 0, 128).waves_per_simd, 16);
        assert_eq!(occupancy(Arch::Gfx1100, 192, 0, 100, 0, 128).waves_per_simd, 8);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(read(b"not an elf", "k", Arch::Gfx942), Err(MetadataError::NotElf(_))));
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x28] = 0xff; // section table far past the end
        elf[0x3c] = 1;
        assert!(matches!(read(&elf, "k", Arch::Gfx942), Err(MetadataError::NotElf(_))));
    }
}
