"""examples/quickstart.py runs."""

import pathlib
import runpy


def test_quickstart_runs(capsys):
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"
    runpy.run_path(str(path), run_name="__main__")
    assert "custom .hasm kernel: ok" in capsys.readouterr().out
