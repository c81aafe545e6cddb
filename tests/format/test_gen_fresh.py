"""The committed FlatBuffers code must be exactly what the pinned flatc makes of the schema."""

from __future__ import annotations

import subprocess
import sys

from slatedb.format import gen


def test_committed_generated_code_is_fresh() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "slatedb.format.gen", "--check"],
        cwd=gen.REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, f"run ./just gen\n{proc.stdout}{proc.stderr}"


def test_check_detects_a_stale_file(tmp_path) -> None:
    """--check must not be vacuous: a modified copy of the generated tree is reported."""
    import shutil

    committed = tmp_path / "fb"
    shutil.copytree(gen.TARGET_DIR, committed, ignore=shutil.ignore_patterns("__pycache__"))
    (committed / "Ulid.py").write_text("# edited\n")
    (committed / "Extra.py").write_text("# extra\n")
    fresh = tmp_path / "fresh"
    generated = gen.generate(fresh)
    assert gen.stale_files(generated, committed) == ["Extra.py", "Ulid.py"]
