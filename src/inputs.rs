//! Files kgpu reads from the user's machine (kubeconfigs, token files,
//! dumps, themes), each with a stated bound: a regular file no larger than
//! its limit, or a clear error. A kubeconfig that is `/dev/zero`, a FIFO
//! that never ends or a 50 GB file is refused before it is read.

use std::io::Read;
use std::path::Path;

/// A kubeconfig (kubectl's are kilobytes; embedded certificates of many
/// clusters stay far below this).
pub const KUBECONFIG_MAX: u64 = 16 << 20;
/// A token file: one line.
pub const TOKEN_MAX: u64 = 64 << 10;
/// One file of a cluster dump (`--file`).
pub const DUMP_MAX: u64 = 2 << 30;
/// A theme file.
pub const THEME_MAX: u64 = 1 << 20;

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b >> 10),
    }
}

/// Refuses `path` unless it is a regular file (after symlinks) of at most
/// `limit` bytes. `what` names it in the error ("the kubeconfig").
pub fn check(path: &Path, limit: u64, what: &str) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {what} {shown}: {e}"))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a directory" } else { "not a regular file (a device, FIFO or socket)" };
        return Err(format!("{what} {shown} is {kind}; give a regular file"));
    }
    if meta.len() > limit {
        return Err(format!("{what} {shown} is {} bytes, over the {} kgpu reads", meta.len(), size(limit)));
    }
    Ok(())
}

/// Reads `path` as text within the bounds of [`check`], never more than
/// `limit` bytes even if it grows meanwhile.
pub fn read_text(path: &Path, limit: u64, what: &str) -> Result<String, String> {
    check(path, limit, what)?;
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {what} {shown}: {e}"))?;
    let mut text = String::new();
    file.take(limit + 1).read_to_string(&mut text).map_err(|e| format!("cannot read {what} {shown}: {e}"))?;
    if text.len() as u64 > limit {
        return Err(format!("{what} {shown} grew past the {} kgpu reads", size(limit)));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_directories_and_oversized_files_are_refused_with_the_reason() {
        let e = read_text(Path::new("/dev/zero"), TOKEN_MAX, "the token file").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_text(Path::new("/tmp"), TOKEN_MAX, "the kubeconfig").unwrap_err();
        assert!(e.contains("a directory"), "{e}");
        let dir = std::env::temp_dir().join(format!("kgpu-inputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big");
        std::fs::write(&big, vec![b'a'; 2048]).unwrap();
        let e = read_text(&big, 1024, "the token file").unwrap_err();
        assert!(e.contains("2048 bytes, over the 1 KiB"), "{e}");
        assert_eq!(read_text(&big, 4096, "x").unwrap().len(), 2048);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
