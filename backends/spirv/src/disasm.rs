//! SPIR-V as text, for golden files and debugging.

use std::io::Write;
use std::process::{Command, Stdio};

/// The module as text: `spirv-dis` (SPIRV-Tools) when it is on PATH, else rspirv's
/// disassembler. The two formats differ, so golden files should say which one they hold
/// ([`disassemble_with_spirv_dis`] and [`disassemble_with_rspirv`] pick one).
pub fn disassemble(words: &[u32]) -> String {
    disassemble_with_spirv_dis(words).unwrap_or_else(|| disassemble_with_rspirv(words))
}

/// `spirv-dis --no-color --no-header`, or `None` when spirv-dis is missing or rejects the module.
pub fn disassemble_with_spirv_dis(words: &[u32]) -> Option<String> {
    let mut child = Command::new("spirv-dis")
        .args(["--no-color", "--no-header", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    // Write from a thread so a large output cannot block the child while we still write.
    let mut stdin = child.stdin.take()?;
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().ok()?;
    writer.join().ok()?.ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

/// rspirv's disassembly; a module rspirv cannot parse gives a line saying why.
pub fn disassemble_with_rspirv(words: &[u32]) -> String {
    use rspirv::binary::Disassemble;
    match rspirv::dr::load_words(words) {
        Ok(module) => module.disassemble(),
        Err(e) => format!("; rspirv could not parse the module: {e}\n"),
    }
}
