//! The linear analyses against the reference ones on random programs with branches, loops,
//! calls, barriers and lane-dependent conditions.

use super::error::ValidationErrorKind as K;
use super::{analysis, reference, Resolver};
use crate::kernel::{Kernel, KernelFacts};

struct Rng(u64);

impl Rng {
    fn below(&mut self, m: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % m as u64) as usize
    }
}

fn random_program(rng: &mut Rng) -> String {
    let labels = 1 + rng.below(5);
    let len = 3 + rng.below(30);
    let mut text = String::from(
        ".kernel k\n.param .buf.u32 buf .rw\n.reg .u32 %r0, %r1, %r2\n.reg .pred %p0, %p1\n",
    );
    let mut placed = vec![false; labels];
    let l = |rng: &mut Rng| format!("L{}", rng.below(labels));
    let r = |rng: &mut Rng| format!("%r{}", rng.below(3));
    let p = |rng: &mut Rng| format!("%p{}", rng.below(2));
    for _ in 0..len {
        if rng.below(4) == 0 {
            let i = rng.below(labels);
            if !placed[i] {
                placed[i] = true;
                text.push_str(&format!("L{i}:\n"));
            }
        }
        let guard = if rng.below(4) == 0 {
            format!("@{}{} ", if rng.below(2) == 0 { "!" } else { "" }, p(rng))
        } else {
            String::new()
        };
        let inst = match rng.below(17) {
            0 => format!("mov.u32 {}, %tid.x", r(rng)),
            1 => format!("mov.u32 {}, {}", r(rng), rng.below(4)),
            2 => format!("add.u32 {}, {}, 1", r(rng), r(rng)),
            3 => format!("ld.u32 {}, buf[0]", r(rng)),
            4 => format!("atom.add.u32 {}, buf[1], 1", r(rng)),
            5 | 6 => format!("setp.lt.u32 {}, {}, 2", p(rng), r(rng)),
            7 | 8 => format!("bra {}", l(rng)),
            9 => "ret".to_string(),
            10 => "exit".to_string(),
            11 | 12 => "barrier".to_string(),
            13 | 14 => format!("call {}", l(rng)),
            15 => format!("loop {}, {}", r(rng), l(rng)),
            _ => format!("st.u32 buf[2], {}", r(rng)),
        };
        text.push_str(&format!("    {guard}{inst};\n"));
    }
    for (i, was) in placed.iter().enumerate() {
        if !was {
            text.push_str(&format!("L{i}:\n"));
        }
    }
    text
}

/// Both analyses of one program; None when it fails before the analyses.
type Both = (
    Result<KernelFacts, super::ValidationError>,
    Result<KernelFacts, super::ValidationError>,
);

fn both(text: &str) -> Option<Both> {
    let program = crate::parse(text).ok()?;
    let mut v = Resolver::new(&program).ok()?;
    let insts = v.resolve_body().ok()?;
    let kernel = Kernel {
        name: program.name.clone(),
        params: program.params.clone(),
        shared: program.shared.clone(),
        scratch: program.scratch.clone(),
        regs: v.regs.clone(),
        insts,
        labels: v.label_list.clone(),
        facts: KernelFacts::default(),
    };
    Some((
        analysis::analyze(&kernel, &v.stmt_of_pc),
        reference::analyze(&kernel, &v.stmt_of_pc),
    ))
}

#[test]
fn linear_analyses_match_the_reference() {
    let mut rng = Rng(0x9E3779B97F4A7C15);
    let (mut ok, mut divergent, mut recursive) = (0, 0, 0);
    for _ in 0..4000 {
        let text = random_program(&mut rng);
        let Some((new, old)) = both(&text) else {
            continue;
        };
        match (&new, &old) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "{text}");
                ok += 1;
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.location, b.location, "{text}\n{a}\n{b}");
                match (&a.kind, &b.kind) {
                    (
                        K::DivergentBarrier { reason: x, .. },
                        K::DivergentBarrier { reason: y, .. },
                    ) => {
                        assert_eq!(x, y, "{text}");
                        divergent += 1;
                    }
                    (x, y) => {
                        assert_eq!(x, y, "{text}");
                        recursive += 1;
                    }
                }
            }
            _ => panic!("{text}\nnew: {new:?}\nold: {old:?}"),
        }
    }
    // The generator reaches every outcome.
    assert!(
        ok > 300 && divergent > 300 && recursive > 100,
        "{ok} {divergent} {recursive}"
    );
}
