"""docs/ENVIRONMENT.md lists every HOLOGRAM_* environment variable the repository mentions, each
in a table row of its own, and nothing else.

The repository's files are the ones git knows (tracked, or new and not ignored); without git (a
copy of the working tree) every file outside the ignored build and venv folders. Committed
benchmark output (bench/results) is not source and is left out."""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = Path("docs/ENVIRONMENT.md")
NAME = re.compile(rb"HOLOGRAM_[A-Z0-9_]+")
# A documented variable: a table row whose first cell is the name in backticks.
ROW = re.compile(r"^\|\s*`(HOLOGRAM_[A-Z0-9_]+)`\s*\|", re.MULTILINE)
SKIP_DIRS = {".git", "target", ".venv", "dist", "__pycache__", "node_modules"}
SKIP_PREFIXES = ("bench/results/",)
# Built files git ignores (the extension module, arrays), for the walk without git.
SKIP_SUFFIXES = (".so", ".pyd", ".pyc", ".npy")


def repository_files():
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for folder, dirs, files in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            names += [(Path(folder) / f).relative_to(ROOT).as_posix() for f in files if not f.endswith(SKIP_SUFFIXES)]
    return sorted(n for n in names if not n.startswith(SKIP_PREFIXES) and Path(n) != PAGE)


def used_variables():
    """Each variable named in the repository, with the first file that names it."""
    first = {}
    for name in repository_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree but still tracked
            continue
        for m in NAME.finditer(path.read_bytes()):
            first.setdefault(m.group().decode(), name)
    return first


def documented_variables():
    return set(ROW.findall((ROOT / PAGE).read_text(encoding="utf-8")))


def test_the_scan_sees_the_repository():
    # Guards the test itself: a scan that found nothing would pass everything below.
    used = used_variables()
    assert "HOLOGRAM_BACKEND" in used and "HOLOGRAM_TEST_BACKENDS" in used, sorted(used)


def test_every_variable_is_documented():
    missing = {v: f for v, f in used_variables().items() if v not in documented_variables()}
    assert not missing, (
        f"add a row to {PAGE} for each of these (name, the file that reads it, what it does, "
        "default, users or tests): "
        + ", ".join(f"{v} (named in {f})" for v, f in sorted(missing.items()))
    )


def test_every_documented_variable_is_still_used():
    stale = documented_variables() - set(used_variables())
    assert not stale, f"{PAGE} documents variables nothing in the repository names any more: {sorted(stale)}"
