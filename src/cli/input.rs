//! The files named on the command line (`plan check`, `parse`, `diagnose`): only regular
//! files are read (`/dev/zero`, a FIFO or a directory is refused with its path), plans
//! whole up to [`PLAN_CAP`], logs as a stream so memory stays bounded at any size. The
//! checks themselves are [`crate::plan::read`]'s (the plan module is core and loads plans
//! without the CLI); this is the CLI's face of them.

pub(crate) use crate::plan::read::{read_capped, ReadError, PLAN_CAP};
use std::io::BufReader;
use std::path::Path;

/// Logs are read in chunks of this size.
const CHUNK: usize = 256 << 10;

/// A log for `parse` or `diagnose`, opened for streaming (no cap: nothing holds it whole).
pub(crate) fn open_log(path: &Path) -> Result<BufReader<std::fs::File>, ReadError> {
    let (file, _) = crate::plan::read::open_regular(path)?;
    Ok(BufReader::with_capacity(CHUNK, file))
}

/// A plan file's text, capped (for callers that need the text beside the loaded plan).
pub(crate) fn plan_text(path: &Path) -> Result<String, ReadError> {
    let bytes = read_capped(path, PLAN_CAP, "a plan file")?;
    String::from_utf8(bytes).map_err(|e| ReadError::Io {
        path: path.to_path_buf(),
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn logs_stream_and_devices_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.log");
        std::fs::write(&p, "x\ny\n").unwrap();
        let mut s = String::new();
        open_log(&p).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "x\ny\n");
        let e = open_log(d.path()).unwrap_err().to_string();
        assert!(e.contains("a directory, not a regular file"), "{e}");
        #[cfg(unix)]
        {
            let e = open_log(Path::new("/dev/zero")).unwrap_err().to_string();
            assert!(e.starts_with("/dev/zero: a character device"), "{e}");
        }
    }
}
