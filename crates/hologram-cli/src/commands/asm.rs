//! `hologram asm FILE`

use std::path::Path;

use crate::error::CliError;

pub fn run(file: &Path) -> Result<(), CliError> {
    let kernel = super::assemble_file(file)?;
    print!("{}", hologram_isa::print(&kernel.to_program()));
    eprintln!(
        "// {}: valid; {} instructions, {} registers, {} parameters, digest {}",
        kernel.name,
        kernel.insts.len(),
        kernel.regs.len(),
        kernel.params.len(),
        hologram_compiler::digest(&kernel)
    );
    Ok(())
}
