//! Reading a file an operator named (a patch, a Dockerfile template) without trusting it:
//! only a regular file is read, never a device (`/dev/zero` grows forever) or a FIFO (whose
//! open blocks until a writer comes, at 3 a.m. never), and never past a bound.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The whole of `path` when it is a regular file of at most `max` bytes.
pub(crate) fn read_file(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file (a device, FIFO or folder cannot be read as one)",
            path.display()
        )));
    }
    if m.len() > max {
        return Err(std::io::Error::other(format!(
            "{} is {} bytes, over the {max} this file may have",
            path.display(),
            m.len()
        )));
    }
    let mut out = Vec::with_capacity(m.len() as usize);
    f.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "{} grew past {max} bytes while read",
            path.display()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_bound() {
        let d = tempfile::tempdir().unwrap();
        let ok = d.path().join("a.patch");
        std::fs::write(&ok, b"--- a/x\n").unwrap();
        assert_eq!(read_file(&ok, 100).unwrap(), b"--- a/x\n");
        assert!(read_file(&ok, 3).unwrap_err().to_string().contains("over"));
        assert!(read_file(Path::new("/dev/zero"), 100)
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
        assert!(read_file(d.path(), 100).is_err());
        // A FIFO with no writer: refused at once, not waited on.
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = std::time::Instant::now();
        assert!(read_file(&fifo, 100).is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }
}
