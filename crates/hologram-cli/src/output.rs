//! Writing to stdout without panicking: `println!` panics when the reader has gone away
//! (`hologram asm F | head`), so every command writes through [`write()`], which reports a closed
//! pipe as [`CliError::StdoutClosed`]; `main` ends quietly on it, as Unix tools do.

use std::io::Write;

use crate::error::CliError;

/// Writes formatted text to stdout and flushes it.
pub fn write(args: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => CliError::StdoutClosed,
            _ => CliError::Io("stdout".into(), e),
        })
}

/// `print!` that returns `Result<(), CliError>` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(format_args!($($arg)*))
    };
}

/// `println!` that returns `Result<(), CliError>` instead of panicking.
macro_rules! outln {
    () => {
        $crate::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
