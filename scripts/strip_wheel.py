"""Strips debug info from the shared libraries inside a wheel, in place (used by gpu-check.sh to
keep the bundle the device tool carries small).

    python3 scripts/strip_wheel.py dist/hologram-*.whl
"""

import os
import subprocess
import sys
import tempfile
import zipfile


def strip_wheel(path: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        with zipfile.ZipFile(path) as z:
            z.extractall(d)
            names = z.namelist()
        for n in names:
            if n.endswith(".so"):
                subprocess.run(["strip", "--strip-debug", os.path.join(d, n)], check=True)
        # RECORD's hashes would no longer match the stripped files: recompute them.
        record = next((n for n in names if n.endswith(".dist-info/RECORD")), None)
        if record is not None:
            import base64
            import hashlib

            lines = []
            for n in names:
                if n == record:
                    lines.append(f"{n},,")
                    continue
                data = open(os.path.join(d, n), "rb").read()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                lines.append(f"{n},sha256={digest},{len(data)}")
            with open(os.path.join(d, record), "w") as f:
                f.write("\n".join(lines) + "\n")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for n in names:
                z.write(os.path.join(d, n), n)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        strip_wheel(p)
