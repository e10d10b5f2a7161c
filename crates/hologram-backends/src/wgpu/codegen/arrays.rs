//! Arrays in WGSL: buffer parameters, `.shared` and `.scratch` arrays, and the code for `ld`,
//! `st` and `atom` on them.
//!
//! - 32-bit elements are `u32` words (`i32` words for arrays with `i32` atomics, so `atomicMin`
//!   and `atomicMax` compare signed); floats are bit-cast.
//! - 8- and 16-bit elements are packed four or two to a `u32` word, little-endian, as in host
//!   memory. A store to a shared or global packed array is an `atomicAnd` then an `atomicOr` on
//!   the word, so lanes storing neighbouring elements of one word do not lose each other's
//!   writes.
//! - 64-bit elements are `u64`/`i64`/`f64` (adapter features permitting).
//! - An array any `atom` touches is declared `atomic<...>`, and then every access to it is atomic.
//!
//! Buffer parameters are bound whole; the element offset and length of the bound range come from
//! the argument buffer, so sub-ranges need no storage-offset alignment.

use std::fmt::Write;

use hologram_isa::{ArrayRef, Kernel, Op, Type};

use super::types::{self, reg_type};

/// Where an array lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// A buffer parameter, bound at `binding`.
    Buffer {
        /// Parameter index.
        param: u32,
        /// Binding number.
        binding: u32,
    },
    /// `var<workgroup>`.
    Shared,
    /// `var<private>`.
    Scratch,
}

/// How one array of the kernel is declared and accessed.
#[derive(Debug, Clone)]
pub struct ArrayLayout {
    /// WGSL identifier.
    pub ident: String,
    /// ISA name (for comments).
    pub name: String,
    /// Element type.
    pub elem: Type,
    /// Where it lives.
    pub space: Space,
    /// Element count of `.shared`/`.scratch` arrays.
    pub len: Option<u32>,
    /// Accessed with atomic operations only.
    pub atomic: bool,
    /// WGSL word type (`u32`, `i32`, `u64`, `i64`, `f64`).
    pub word: &'static str,
    /// Lives in a pool buffer shared with other parameters (see [`Pool`]).
    pub pooled: bool,
}

/// Elements per 32-bit word for packed types (1 otherwise).
pub fn per_word(elem: Type) -> u32 {
    match elem.size_bytes() {
        1 => 4,
        2 => 2,
        _ => 1,
    }
}

/// The layout of every array, in kernel array-index order (parameters, shared, scratch), with
/// bindings assigned within `max_storage_buffers`.
pub fn layouts(k: &Kernel, max_storage_buffers: u32) -> Result<Layouts, String> {
    let total = k.params.len() + k.shared.len() + k.scratch.len();
    let mut atomic = vec![false; total];
    let mut atomic_i32 = vec![false; total];
    for inst in &k.insts {
        match &inst.op {
            Op::Atom { mem, ty, .. } => {
                atomic[mem.array as usize] = true;
                atomic_i32[mem.array as usize] |= *ty == Type::I32;
            }
            Op::St { mem, ty, .. }
                if ty.size_bytes() < 4 && !matches!(k.array(mem.array), ArrayRef::Scratch(_)) =>
            {
                atomic[mem.array as usize] = true;
            }
            _ => {}
        }
    }
    let mut arrays: Vec<ArrayLayout> = (0..total as u32)
        .map(|id| {
            let (name, elem, len) = k.array_info(id);
            let (space, ident) = match k.array(id) {
                ArrayRef::Param(p) => (
                    Space::Buffer {
                        param: p,
                        binding: u32::MAX,
                    },
                    format!("b{p}"),
                ),
                ArrayRef::Shared(s) => (Space::Shared, format!("s{s}")),
                ArrayRef::Scratch(s) => (Space::Scratch, format!("x{s}")),
            };
            let is_atomic = atomic[id as usize];
            let word = match elem {
                Type::I32 if is_atomic && atomic_i32[id as usize] => "i32",
                Type::I64 => "i64",
                Type::U64 => "u64",
                Type::F64 if is_atomic => "u64",
                Type::F64 => "f64",
                _ => "u32",
            };
            ArrayLayout {
                ident,
                name: name.to_string(),
                elem,
                space,
                len,
                atomic: is_atomic,
                word,
                pooled: false,
            }
        })
        .collect();
    let buffers: Vec<u32> = k
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.kind, hologram_isa::ParamKind::Buffer { .. }))
        .map(|(i, _)| i as u32)
        .collect();
    // Two bindings are internal (error word, arguments). Past the adapter's limit, the last
    // buffer parameters share pool buffers, one per word type.
    let internal = 2u32;
    let class = |a: &ArrayLayout| a.elem_decl();
    let mut dedicated = buffers.len();
    loop {
        let mut classes: Vec<String> = buffers[dedicated..]
            .iter()
            .map(|&p| class(&arrays[p as usize]))
            .collect();
        classes.sort();
        classes.dedup();
        if dedicated as u32 + classes.len() as u32 + internal <= max_storage_buffers {
            break;
        }
        if dedicated == 0 {
            return Err(format!(
                "{} buffer parameters; the adapter allows only {max_storage_buffers} storage buffers per shader",
                buffers.len()
            ));
        }
        dedicated -= 1;
    }
    let mut binding = super::ARGS_BINDING + 1;
    for &p in &buffers[..dedicated] {
        arrays[p as usize].space = Space::Buffer { param: p, binding };
        binding += 1;
    }
    let mut pools: Vec<Pool> = Vec::new();
    for &p in &buffers[dedicated..] {
        let c = class(&arrays[p as usize]);
        let idx = match pools.iter().position(|pool| pool.decl == c) {
            Some(i) => i,
            None => {
                pools.push(Pool {
                    binding,
                    decl: c,
                    params: Vec::new(),
                });
                binding += 1;
                pools.len() - 1
            }
        };
        pools[idx].params.push(p);
        let a = &mut arrays[p as usize];
        a.space = Space::Buffer {
            param: p,
            binding: pools[idx].binding,
        };
        a.ident = format!("hg_pool{idx}");
        a.pooled = true;
    }
    Ok(Layouts { arrays, pools })
}

/// Buffer parameters that share one binding (when a kernel has more buffer parameters than the
/// adapter has storage-buffer bindings): the launcher copies each one's range into the pool
/// before the dispatch and the writable ones back after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Binding number.
    pub binding: u32,
    /// WGSL element type of the pool array.
    pub decl: String,
    /// Parameters in the pool.
    pub params: Vec<u32>,
}

impl Pool {
    /// The module-scope declaration.
    pub fn declaration(&self, index: usize) -> String {
        format!(
            "@group(0) @binding({}) var<storage, read_write> hg_pool{index}: array<{}>;\n",
            self.binding, self.decl
        )
    }
}

/// Every array's layout, and the pools.
#[derive(Debug, Clone)]
pub struct Layouts {
    /// In kernel array-index order (parameters, shared, scratch); scalar parameters get an
    /// unused placeholder.
    pub arrays: Vec<ArrayLayout>,
    /// Pools of buffer parameters.
    pub pools: Vec<Pool>,
}

impl ArrayLayout {
    /// Words of a fixed-size array.
    fn words(&self) -> u32 {
        self.len.unwrap_or(0).div_ceil(per_word(self.elem)).max(1)
    }

    /// The WGSL element type of the array (`u32`, `atomic<u32>`, ...).
    pub fn elem_decl(&self) -> String {
        if self.atomic {
            format!("atomic<{}>", self.word)
        } else {
            self.word.to_string()
        }
    }

    /// The module-scope declaration (empty for scalar parameters).
    pub fn declaration(&self) -> String {
        let mut d = String::new();
        let name = types::comment_safe(&self.name);
        match self.space {
            Space::Buffer { binding, .. } if binding != u32::MAX && !self.pooled => {
                let _ = writeln!(
                    d,
                    "@group(0) @binding({binding}) var<storage, read_write> {}: array<{}>; // {name}",
                    self.ident,
                    self.elem_decl()
                );
            }
            Space::Buffer { .. } => {}
            Space::Shared => {
                let _ = writeln!(
                    d,
                    "var<workgroup> {}: array<{}, {}>; // {name}",
                    self.ident,
                    self.elem_decl(),
                    self.words()
                );
            }
            Space::Scratch => {
                let _ = writeln!(
                    d,
                    "var<private> {}: array<{}, {}>; // {name}",
                    self.ident,
                    self.elem_decl(),
                    self.words()
                );
            }
        }
        d
    }

    /// The element count as a u32 expression.
    pub fn len_expr(&self) -> String {
        match (self.space, self.len) {
            (Space::Buffer { param, .. }, _) => {
                format!("hg_args[{}]", super::param_word(param) + 1)
            }
            (_, Some(len)) => format!("{len}u"),
            _ => "0u".into(),
        }
    }

    /// The element index (u32) within the bound memory for an in-bounds index `i`.
    fn element(&self, i: &str) -> String {
        match self.space {
            Space::Buffer { param, .. } => {
                format!("(hg_args[{}] + {i})", super::param_word(param))
            }
            _ => i.to_string(),
        }
    }

    /// `(word index, bit shift)` of element index `i` for packed arrays.
    fn packed(&self, i: &str) -> (String, String) {
        let e = self.element(i);
        match self.elem.size_bytes() {
            1 => (format!("({e} >> 2u)"), format!("(({e} & 3u) * 8u)")),
            _ => (format!("({e} >> 1u)"), format!("(({e} & 1u) * 16u)")),
        }
    }

    fn word_ref(&self, w: &str) -> String {
        format!("{}[{w}]", self.ident)
    }

    fn read_word(&self, w: &str) -> String {
        if self.atomic {
            format!("atomicLoad(&{})", self.word_ref(w))
        } else {
            self.word_ref(w)
        }
    }

    /// Converts a word value to the register type of the element.
    fn word_to_reg(&self, v: &str) -> String {
        let reg = reg_type(self.elem);
        if reg == self.word {
            v.to_string()
        } else {
            format!("bitcast<{reg}>({v})")
        }
    }

    /// Converts a register value to the word type.
    fn reg_to_word(&self, v: &str) -> String {
        let reg = reg_type(self.elem);
        if reg == self.word {
            v.to_string()
        } else {
            format!("bitcast<{}>({v})", self.word)
        }
    }

    /// An expression loading element `i` (in bounds) in the register type.
    pub fn load(&self, i: &str) -> String {
        if self.elem.size_bytes() >= 4 {
            return self.word_to_reg(&self.read_word(&self.element(i)));
        }
        let (w, sh) = self.packed(i);
        let mask = if self.elem.size_bytes() == 1 {
            "0xffu"
        } else {
            "0xffffu"
        };
        let raw = format!("(({} >> {sh}) & {mask})", self.read_word(&w));
        match self.elem {
            Type::U8 | Type::U16 => raw,
            Type::I8 => format!("(bitcast<i32>({raw} << 24u) >> 24u)"),
            Type::I16 => format!("(bitcast<i32>({raw} << 16u) >> 16u)"),
            Type::F16 => format!("hg_h2f({raw})"),
            _ => format!("hg_b2f({raw})"),
        }
    }

    /// Statements storing register value `v` into element `i` (in bounds).
    pub fn store(&self, i: &str, v: &str) -> Vec<String> {
        if self.elem.size_bytes() >= 4 {
            let e = self.element(i);
            let val = self.reg_to_word(v);
            return vec![if self.atomic {
                format!("atomicStore(&{}, {val});", self.word_ref(&e))
            } else {
                format!("{} = {val};", self.word_ref(&e))
            }];
        }
        let (w, sh) = self.packed(i);
        let mask = if self.elem.size_bytes() == 1 {
            "0xffu"
        } else {
            "0xffffu"
        };
        let bits = match self.elem {
            Type::U8 | Type::U16 => format!("({v} & {mask})"),
            Type::I8 | Type::I16 => format!("(bitcast<u32>({v}) & {mask})"),
            Type::F16 => format!("hg_f2h({v})"),
            _ => format!("hg_f2b({v})"),
        };
        let mut s = vec![format!("let hg_w = {w};"), format!("let hg_sh = {sh};")];
        if self.atomic {
            s.push(format!(
                "atomicAnd(&{}, ~({mask} << hg_sh));",
                self.word_ref("hg_w")
            ));
            s.push(format!(
                "atomicOr(&{}, {bits} << hg_sh);",
                self.word_ref("hg_w")
            ));
        } else {
            let r = self.word_ref("hg_w");
            s.push(format!(
                "{r} = ({r} & ~({mask} << hg_sh)) | ({bits} << hg_sh);"
            ));
        }
        s
    }

    /// A pointer expression to element `i` of an atomic array.
    pub fn atomic_ptr(&self, i: &str) -> String {
        format!("&{}", self.word_ref(&self.element(i)))
    }

    /// Converts a register value to the atomic word type.
    pub fn atomic_value(&self, v: &str) -> String {
        self.reg_to_word(v)
    }

    /// Converts an atomic word value to the register type.
    pub fn atomic_result(&self, v: &str) -> String {
        self.word_to_reg(v)
    }
}
