//! Renumbering: registers become `%r0, %r1, ...` and labels `L0, L1, ...` in the order they first
//! appear in the program text; unused registers and labels disappear.

use std::collections::HashMap;

use hologram_isa::{Inst, Kernel, KernelFacts, RegInfo};

/// Rebuilds `kernel` with `insts`, renaming registers and labels in first-use order.
pub(crate) fn run(kernel: &Kernel, insts: Vec<Inst<u32>>) -> Kernel {
    let mut reg_map: HashMap<u32, u32> = HashMap::new();
    let mut regs: Vec<RegInfo> = Vec::new();
    let mut label_map: HashMap<u32, u32> = HashMap::new();
    let targets: std::collections::HashSet<u32> = insts
        .iter()
        .filter_map(|i| i.op.target().copied())
        .collect();
    let mut labels: Vec<(String, u32)> = Vec::new();
    let mut new_insts = Vec::with_capacity(insts.len());
    for (pc, inst) in insts.iter().enumerate() {
        let pc = pc as u32;
        if targets.contains(&pc) && !label_map.contains_key(&pc) {
            label_map.insert(pc, label_map.len() as u32);
        }
        if targets.contains(&pc) {
            labels.push((format!("L{}", label_map[&pc]), pc));
        }
        let mut reg = |r: &u32| -> u32 {
            *reg_map.entry(*r).or_insert_with(|| {
                let ty = kernel.regs[*r as usize].ty;
                regs.push(RegInfo {
                    name: format!("r{}", regs.len()),
                    ty,
                    declared: false,
                });
                regs.len() as u32 - 1
            })
        };
        let guard = inst.guard.as_ref().map(|g| hologram_isa::Guard {
            pred: reg(&g.pred),
            negate: g.negate,
        });
        let mut label = |t: &u32| -> u32 {
            let next = label_map.len() as u32;
            label_map.entry(*t).or_insert(next);
            *t
        };
        let op = inst.op.map(&mut reg, &mut |p| *p, &mut |a| *a, &mut label);
        new_insts.push(Inst { guard, op });
    }
    let end = insts.len() as u32;
    if targets.contains(&end) {
        let next = label_map.len() as u32;
        let id = *label_map.entry(end).or_insert(next);
        labels.push((format!("L{id}"), end));
    }
    Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        shared: kernel.shared.clone(),
        scratch: kernel.scratch.clone(),
        regs,
        insts: new_insts,
        labels,
        facts: KernelFacts::default(),
    }
}
