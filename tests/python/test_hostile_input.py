"""Hostile kernel text raises hologram.ValidationError with a location; it never kills the
interpreter (deep call chains, long recursion, huge literals, bytes that are not UTF-8, mutated
programs)."""

import pathlib
import random
import re

import pytest

import hologram as hg

CONFORMANCE = pathlib.Path(__file__).resolve().parents[1] / "conformance"
LOCATED = re.compile(r"^\d+:\d+: ")


def chain(depth: int, cycle: bool = False) -> str:
    lines = [
        ".kernel chain",
        ".param .buf.u32 y .rw",
        "    mov.u32 %a, 0;",
        "    call F0;",
        "    st.u32 y[%gid], %a;",
        "    exit;",
    ]
    for k in range(depth):
        lines += [f"F{k}:", "    add.u32 %a, %a, 1;"]
        if k + 1 < depth:
            lines.append(f"    call F{k + 1};")
        elif cycle:
            lines.append("    call F0;")
        lines.append("    ret;")
    return "\n".join(lines) + "\n"


def located_error(text) -> str:
    with pytest.raises(hg.ValidationError) as info:
        hg.asm(text)
    msg = str(info.value)
    assert LOCATED.match(msg), msg
    # The position is also on the exception, and it is the one the message starts with.
    assert msg.startswith(f"{info.value.line}:{info.value.column}: "), msg
    return msg


def test_a_50000_deep_call_chain_is_a_located_error():
    text = chain(50_000)
    msg = located_error(text)
    assert "calls nest 50000 deep" in msg and "the limit is 64" in msg
    # At the call that nests one too deep: `call F64;` inside F63.
    line = text.splitlines().index("    call F64;") + 1
    assert msg.startswith(f"{line}:5: "), msg
    # The interpreter is still here, and the limit itself is fine.
    assert hg.asm(chain(64)).name == "chain"
    assert hg.Program(chain(64).encode()).name == "chain"


def test_long_recursion_and_deep_chains_as_bytes():
    assert "recursive call" in located_error(chain(20_000, cycle=True))
    assert "calls nest" in located_error(chain(20_000).encode())


def test_text_that_is_not_utf8_gives_the_byte_offset():
    msg = located_error(b".kernel k\n    exit;\n\xff\xfe")
    assert msg.startswith("3:1: ") and "byte 20" in msg
    # Columns count characters: multi-byte ones before the bad byte count once.
    msg = located_error(".kernel k\n    // caf\u00e9 \U0001F600 ".encode() + b"\xfe\n    exit;\n")
    assert msg.startswith("2:15: ") and "byte 28 (0xfe)" in msg
    # A str with a lone surrogate cannot be UTF-8: located at the surrogate.
    msg = located_error(".kernel k\n// \u00e9\U0001F600 \ud800\n    exit;\n")
    assert msg.startswith("2:7: ") and "U+D800" in msg and "index 16" in msg
    with pytest.raises(TypeError):
        hg.asm(42)


def test_huge_literals_and_declarations():
    located_error(".kernel k\n.param .buf.u32 y .rw\n    st.u32 y[0], " + "9" * 1_000_000 + ";\n")
    located_error(".kernel k\n.param .buf.f32 y .rw\n    st.f32 y[0], 1" + "e-" * 500_000 + ";\n")
    msg = located_error(".kernel k\n.shared .f64 a[4096]\n.shared .f64 b[4096]\n    exit;\n")
    assert msg.startswith("3:1: .shared memory")


def test_mutated_conformance_programs_only_raise_validation_errors():
    rng = random.Random(18)
    files = sorted(CONFORMANCE.glob("*.hasm"))
    assert files
    accepted = 0
    for i in range(600):
        data = bytearray(files[i % len(files)].read_bytes())
        for _ in range(rng.randint(1, 3)):
            kind = rng.randrange(4)
            if kind == 0 and data:
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            elif kind == 1:
                lines = data.split(b"\n")
                del lines[rng.randrange(len(lines))]
                data = bytearray(b"\n".join(lines))
            elif kind == 2:
                at = rng.randrange(len(data) + 1)
                data[at:at] = rng.choice([b"call X;\nX:\n", b"99999999999999999999999", b"\x80", b"%tid.q", b"ret;\n"])
            else:
                del data[rng.randrange(len(data) + 1):]
        try:
            hg.asm(bytes(data))
            accepted += 1
        except hg.ValidationError as e:
            assert LOCATED.match(str(e)), str(e)
    assert 0 < accepted < 600
