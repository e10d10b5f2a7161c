//! Every `.hasm` example in the crate README assembles and round-trips.

#[test]
fn readme_examples_assemble() {
    let readme = include_str!("../README.md");
    let mut count = 0;
    for block in readme.split("```").skip(1).step_by(2) {
        let body = block
            .trim_start_matches(|c: char| c.is_alphanumeric())
            .trim_start();
        if !body.starts_with(".kernel") {
            continue;
        }
        let kernel = hologram_isa::assemble(body).unwrap_or_else(|e| panic!("{e}\n{body}"));
        let program = kernel.to_program();
        let printed = hologram_isa::print(&program);
        assert_eq!(hologram_isa::assemble(&printed).unwrap(), kernel);
        count += 1;
    }
    assert_eq!(count, 11, "every instruction group has an example");
}
