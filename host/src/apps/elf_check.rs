//! A plugin file's ELF structure, checked before any loader maps it: a
//! 64-bit little-endian shared object for this machine, whose program
//! headers and segments all lie inside the file. A file cut short (a copy
//! onto a full disk, a stalled writer) would otherwise make the dynamic
//! loader fault (SIGBUS) on the missing pages.

use crate::apps::error::LoadError;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Size of an ELF64 file header, and of one ELF64 program header.
const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
/// The program header types named in messages.
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
/// `e_type` of a shared object.
const ET_DYN: u16 = 3;
/// `e_phnum` meaning "the count is elsewhere" (not used by shared objects).
const PN_XNUM: u16 = 0xffff;

/// Checks the ELF structure of `file` (`len` bytes).
pub fn check(file: &File, len: u64) -> Result<(), LoadError> {
    let mut head = [0u8; EHDR_SIZE];
    if len < EHDR_SIZE as u64 || file.read_exact_at(&mut head, 0).is_err() {
        return Err(LoadError::ElfTooShort {
            need: EHDR_SIZE,
            len,
        });
    }
    check_header(&head)?;
    let phoff = u64le(&head, 32);
    let phentsize = u16le(&head, 54);
    let phnum = u16le(&head, 56);
    if usize::from(phentsize) != PHDR_SIZE || phnum == PN_XNUM {
        return Err(LoadError::ProgramHeaders {
            count: phnum,
            size: phentsize,
        });
    }
    let table = u64::from(phnum) * PHDR_SIZE as u64;
    let table_end = phoff.checked_add(table).filter(|end| *end <= len);
    let Some(_) = table_end else {
        return Err(LoadError::HeadersTruncated {
            end: phoff.saturating_add(table),
            len,
        });
    };
    let mut headers = vec![0u8; table as usize];
    file.read_exact_at(&mut headers, phoff)
        .map_err(LoadError::io("read the program headers"))?;
    headers
        .chunks_exact(PHDR_SIZE)
        .try_for_each(|ph| check_segment(ph, len))
}

/// The fixed part of the file header: magic, class, byte order, type and
/// machine.
fn check_header(head: &[u8; EHDR_SIZE]) -> Result<(), LoadError> {
    if head[..4] != *b"\x7fELF" {
        return Err(LoadError::NotElf);
    }
    if head[4] != 2 || head[5] != 1 {
        return Err(LoadError::ElfClass {
            class: head[4],
            order: head[5],
        });
    }
    let kind = u16le(head, 16);
    if kind != ET_DYN {
        return Err(LoadError::NotSharedObject { kind });
    }
    let machine = u16le(head, 18);
    match host_machine() {
        Some(ours) if ours != machine => Err(LoadError::WrongMachine {
            machine,
            arch: std::env::consts::ARCH,
            ours,
        }),
        _ => Ok(()),
    }
}

/// One program header: its bytes in the file must exist.
fn check_segment(ph: &[u8], len: u64) -> Result<(), LoadError> {
    let (kind, offset, filesz) = (u32le(ph, 0), u64le(ph, 8), u64le(ph, 32));
    if filesz == 0 {
        return Ok(());
    }
    let end = offset.saturating_add(filesz);
    if end <= len {
        return Ok(());
    }
    let segment = match kind {
        PT_LOAD => "LOAD".to_string(),
        PT_DYNAMIC => "DYNAMIC".to_string(),
        other => format!("type {other:#x}"),
    };
    Err(LoadError::SegmentTruncated { segment, end, len })
}

/// The ELF `e_machine` of this build's target, where known.
fn host_machine() -> Option<u16> {
    match std::env::consts::ARCH {
        "x86_64" => Some(62),
        "aarch64" => Some(183),
        "riscv64" => Some(243),
        "powerpc64" => Some(21),
        "s390x" => Some(22),
        "loongarch64" => Some(258),
        _ => None,
    }
}

fn u16le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32le(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64le(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// This test binary's own bytes are not a shared object on every
    /// toolchain, so the tests build a minimal one: a header and one LOAD
    /// segment of `seg` bytes at offset 120.
    fn image(seg: u64) -> Vec<u8> {
        let mut b = vec![0u8; 120];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[16..18].copy_from_slice(&ET_DYN.to_le_bytes());
        b[18..20].copy_from_slice(&host_machine().unwrap_or(0).to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        b[64..68].copy_from_slice(&PT_LOAD.to_le_bytes());
        b[72..80].copy_from_slice(&120u64.to_le_bytes());
        b[96..104].copy_from_slice(&seg.to_le_bytes());
        b.resize(b.len() + seg as usize, 0xAA);
        b
    }

    /// The check's verdict, as the refusal line.
    fn checked(bytes: &[u8]) -> Result<(), String> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        check(&f, bytes.len() as u64).map_err(|e| e.to_string())
    }

    #[test]
    fn a_whole_image_passes() {
        assert_eq!(checked(&image(100)), Ok(()));
    }

    #[test]
    fn a_cut_segment_is_named_with_both_sizes() {
        let mut b = image(100);
        b.truncate(170);
        let err = checked(&b).unwrap_err();
        assert_eq!(
            err,
            "truncated: LOAD segment ends at byte 220 but the file has 170 bytes"
        );
    }

    #[test]
    fn text_short_files_and_32_bit_are_refused() {
        assert!(checked(&[b'x'; 100])
            .unwrap_err()
            .contains("not an ELF file"));
        assert!(checked(b"\x7fELF")
            .unwrap_err()
            .contains("ELF header needs 64"));
        let mut b = image(10);
        b[4] = 1;
        assert!(checked(&b).unwrap_err().contains("64-bit little-endian"));
        let mut b = image(10);
        b[56..58].copy_from_slice(&40u16.to_le_bytes());
        assert!(checked(&b)
            .unwrap_err()
            .contains("program headers end past"));
    }
}
