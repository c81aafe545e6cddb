"""A checkpoint name that is not UTF-8 text (a lone surrogate: what Python makes of a name
given as non-UTF-8 bytes on a command line) is refused at the call with ``InvalidArgumentError``
naming it, nothing written.

Found with ``slatedb create-checkpoint --name $'\\xff'``: "unexpected UnicodeEncodeError: 'utf-8'
codec can't encode character '\\udcff'" from deep in the manifest encoder (exit 1), and the
same bare ``UnicodeEncodeError`` from ``db.create_checkpoint(options=CheckpointOptions(name=...))``.
"""

from __future__ import annotations

import pytest

import slatedb
from slatedb import CheckpointOptions
from slatedb.cli import main
from slatedb.errors import InvalidArgumentError


@pytest.mark.parametrize("name", ["\ud800", "ok\udcff", "\udfff tail"])
def test_a_name_that_is_not_utf8_text_is_refused_naming_it(name) -> None:
    with pytest.raises(InvalidArgumentError, match="UTF-8"):
        CheckpointOptions(name=name)


def test_the_api_and_the_cli_refuse_it_and_write_nothing(tmp_path, capsys) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v")
        with pytest.raises(InvalidArgumentError, match="UTF-8"):
            db.create_checkpoint(options={"name": "\udcff"})
        assert db.create_checkpoint(options=CheckpointOptions(name="ü😀")).id  # any other text is fine
    capsys.readouterr()
    assert main(["--path", url, "create-checkpoint", "--name", "\udcff"]) == 2
    err = capsys.readouterr().err
    assert "UTF-8" in err and "unexpected" not in err, err
    assert main(["--path", url, "--json", "list-checkpoints"]) == 0
    assert "\\udcff" not in capsys.readouterr().out
