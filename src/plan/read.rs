//! Bounded reads of the files an operator names (plans, commits files, logs).
//!
//! Whatever path is given, nothing is read that is not a regular file: `/dev/zero`, a FIFO
//! or a directory would otherwise grow memory without end or block forever. Whole-file
//! reads stop at a cap, so a wrong file costs an error message, not the box's memory.
//! This is the one definition: the plan module is core and cannot use the CLI, so the
//! CLI's `input` module re-uses it for `parse` and `diagnose`.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A plan (or its commits file) larger than this is refused. Plans are written by hand or
/// imported: the seed plan of 95 commits is ~100 KiB, so 16 MiB is ~150× the largest
/// real one while a wrong file is refused before it is held in memory.
pub const PLAN_CAP: u64 = 16 << 20;

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// A character or block device, FIFO, socket or directory.
    NotAFile { path: PathBuf, what: &'static str },
    TooLarge {
        path: PathBuf,
        cap: u64,
        what: &'static str,
    },
}

impl ReadError {
    pub fn path(&self) -> &Path {
        match self {
            ReadError::Io { path, .. }
            | ReadError::NotAFile { path, .. }
            | ReadError::TooLarge { path, .. } => path,
        }
    }

    /// The message without the path (for callers that print the path themselves).
    pub fn reason(&self) -> String {
        match self {
            ReadError::Io { error, .. } => error.to_string(),
            ReadError::NotAFile { what, .. } => format!("{what}, not a regular file"),
            ReadError::TooLarge { cap, what, .. } => {
                format!("larger than {}, the limit for {what}", size(*cap))
            }
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path().display(), self.reason())
    }
}

impl std::error::Error for ReadError {}

/// `16 MiB`, `2 GiB`: caps are powers of two.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{b} bytes"),
    }
}

fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        return None;
    }
    if t.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_char_device() {
            return Some("a character device");
        }
        if t.is_block_device() {
            return Some("a block device");
        }
        if t.is_fifo() {
            return Some("a FIFO");
        }
        if t.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a file")
}

/// Open `path` for reading if it is a regular file; returns it with its size.
pub(crate) fn open_regular(path: &Path) -> Result<(File, u64), ReadError> {
    let io = |error| ReadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    // Non-blocking: opening a FIFO with no writer would otherwise wait forever, before
    // the type check below can refuse it. No effect on regular files.
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path).map_err(io)?;
    // The type of what was opened (not of the path, which may change in between).
    let meta = file.metadata().map_err(io)?;
    if let Some(what) = kind_of(&meta) {
        return Err(ReadError::NotAFile {
            path: path.to_path_buf(),
            what,
        });
    }
    Ok((file, meta.len()))
}

/// The whole of `path`, refused when it is not a regular file or is larger than `cap`
/// (`what` names the kind of file in the message: "a plan file").
pub(crate) fn read_capped(path: &Path, cap: u64, what: &'static str) -> Result<Vec<u8>, ReadError> {
    let too_large = || ReadError::TooLarge {
        path: path.to_path_buf(),
        cap,
        what,
    };
    let (file, len) = open_regular(path)?;
    if len > cap {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // One byte past the cap tells a file that grew after the size was read.
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| ReadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
    if bytes.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(bytes)
}

/// A small text file (a config, an override, a plan read again): capped like a plan, and
/// text. A missing file is `Ok(None)`, for callers whose file is optional.
pub(crate) fn read_text(path: &Path, what: &'static str) -> Result<Option<String>, ReadError> {
    match read_capped(path, PLAN_CAP, what) {
        Ok(b) => String::from_utf8(b).map(Some).map_err(|_| ReadError::Io {
            path: path.to_path_buf(),
            error: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        }),
        Err(ReadError::Io { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// `bytes` as text, or where (file:line:col) the first byte that is not UTF-8 is.
pub(super) fn utf8(name: &str, bytes: Vec<u8>) -> Result<String, (super::Loc, String)> {
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bad = e.as_bytes()[at];
        let before = String::from_utf8_lossy(&e.as_bytes()[..at]).into_owned();
        let loc = super::source::SourceFile::new(name, before).loc(at);
        (
            loc,
            format!("the file is not UTF-8 text (byte 0x{bad:02x}); save it as UTF-8"),
        )
    })
}

/// A plan file's text: capped at [`PLAN_CAP`], UTF-8 (else an error at the first bad byte).
pub(super) fn plan_text(path: &Path) -> Result<String, super::LoadError> {
    let bytes = read_capped(path, PLAN_CAP, "a plan file").map_err(|e| super::LoadError::Io {
        path: path.to_path_buf(),
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, e.reason()),
    })?;
    utf8(&path.display().to_string(), bytes).map_err(|(loc, message)| {
        super::LoadError::Invalid(vec![super::Diag {
            loc: Some(loc),
            commit: None,
            kind: "encoding",
            message,
        }])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_others_refused_by_name() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.toml");
        std::fs::write(&p, "abc").unwrap();
        assert_eq!(read_capped(&p, 3, "a plan file").unwrap(), b"abc");
        let e = read_capped(&p, 2, "a plan file").unwrap_err().to_string();
        assert!(
            e.contains("p.toml") && e.contains("2 bytes, the limit for a plan file"),
            "{e}"
        );
        let e = read_capped(d.path(), 10, "x").unwrap_err().to_string();
        assert!(e.contains(": a directory, not a regular file"), "{e}");
        let e = read_capped(&d.path().join("nope"), 10, "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope"), "{e}");
        #[cfg(unix)]
        {
            let e = read_capped(Path::new("/dev/zero"), PLAN_CAP, "x")
                .unwrap_err()
                .to_string();
            assert!(e.contains("/dev/zero: a character device"), "{e}");
            let fifo = d.path().join("fifo");
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            let e = read_capped(&fifo, 10, "x").unwrap_err().to_string();
            assert!(e.contains("fifo: a FIFO"), "{e}");
        }
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(2 << 30), "2 GiB");
    }
}
