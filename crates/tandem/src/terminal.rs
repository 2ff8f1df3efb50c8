//! Standard output: the width `tandem status` wraps at, and writes that end quietly when
//! the reader goes away (`tandem events | head`).
//!
//! Invariant: the width is the terminal's only when standard output is a terminal that
//! reports a non-zero width; otherwise it is [`WIDTH_DEFAULT`], as in drbdsetup.

use std::io::{self, IsTerminal, Write};

use crate::error::CliError;

/// Width used when standard output is not a terminal, or the terminal does not say.
pub const WIDTH_DEFAULT: usize = 80;

/// The column count to wrap status output at.
pub fn stdout_width() -> usize {
    if !io::stdout().is_terminal() {
        return WIDTH_DEFAULT;
    }
    terminal_columns().unwrap_or(WIDTH_DEFAULT)
}

/// The terminal's column count from `TIOCGWINSZ`, if it reports one.
fn terminal_columns() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points to a live,
    // properly aligned local of exactly that type; fd 1 is only read, never closed.
    let result = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    if result != 0 || size.ws_col == 0 {
        return None;
    }
    Some(usize::from(size.ws_col))
}

/// Whether output should go on after a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The text was written and flushed.
    Done,
    /// The reader closed the pipe; stop producing output and exit successfully.
    ReaderGone,
}

/// Writes `text` to standard output and flushes it, so streamed lines appear at once.
pub fn print(text: &str) -> Result<Written, CliError> {
    let mut stdout = io::stdout().lock();
    let result = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    match result {
        Ok(()) => Ok(Written::Done),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(Written::ReaderGone),
        Err(error) => Err(CliError::Stdout(error)),
    }
}
