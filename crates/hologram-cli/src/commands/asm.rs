//! `hologram asm FILE... [--canonical]`

use std::path::PathBuf;

use crate::error::CliError;

/// `text` with exactly one final newline, so every program printed ends its last line.
fn one_final_newline(text: &str) -> String {
    format!("{}\n", text.trim_end_matches('\n'))
}

pub fn run(files: &[PathBuf], canonical: bool) -> Result<(), CliError> {
    let (mut before, mut after) = (0usize, 0usize);
    for file in files {
        let kernel = super::assemble_file(file)?;
        if files.len() > 1 {
            outln!("// {}", file.display())?;
        }
        if canonical {
            let (canon, red) = hologram_compiler::canonicalize(&kernel);
            out!(
                "{}",
                one_final_newline(&hologram_isa::print(&canon.to_program()))
            )?;
            outln!(
                "// digest {}  ({} -> {} instructions)",
                hologram_compiler::text_digest(&canon),
                red.before,
                red.after
            )?;
            before += red.before;
            after += red.after;
        } else {
            out!(
                "{}",
                one_final_newline(&hologram_isa::print(&kernel.to_program()))
            )?;
            eprintln!(
                "// {}: valid; {} instructions, {} registers, {} parameters, digest {}",
                kernel.name,
                kernel.insts.len(),
                kernel.regs.len(),
                kernel.params.len(),
                hologram_compiler::digest(&kernel)
            );
        }
    }
    if canonical && files.len() > 1 {
        let pct = if before > 0 {
            100.0 * (before - after) as f64 / before as f64
        } else {
            0.0
        };
        outln!(
            "// total: {before} -> {after} instructions over {} programs ({pct:.1}% fewer)",
            files.len()
        )?;
    }
    Ok(())
}
