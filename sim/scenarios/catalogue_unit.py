"""The bug catalogue's two side tables (:mod:`sim.scenarios.catalogue` re-exports both): the
switches held by unit tests instead of seeds, and the bug classes still planned."""

from __future__ import annotations

from slatedb.runtime import switches

#: Switches of defences beyond the contract the simulator's worlds keep (spec/protocols/destroy.md DESTROY-A1/A2: no
#: process stalls past a soft destroy's grace; nothing but GC runs during a hard destroy), so that no seed reaches
#: their branch, or whose first catching seed is beyond any budget the test suite can hunt: switch -> the unit test
#: (``path::function``) that turns the switch on and sees the failure the defence prevents. The destroy world broke
#: both promises before 2026-11-27; seeds 409 and 1880 of that world reached these two.
UNIT_CAUGHT: dict[str, str] = {
    switches.WRITER_KEEPS_OPEN_AFTER_DESTROY:
        "tests/db/test_open_after_destroy.py::test_without_the_take_back_the_open_resurrects_the_database",
    switches.MANIFEST_KEPT_AFTER_DESTROY:
        "tests/gc/test_destroy_race.py::test_without_the_commit_take_back_the_lone_manifest_outlives_the_database",
    # Not beyond the contract, but too rare for a budget: gc 3741 is the first seed that needs it.
    switches.GC_JUDGES_EXPIRY_NOW:
        "tests/gc/test_stale_snapshot.py::test_judging_expiry_by_the_clock_after_the_read_deletes_a_pinned_manifest",
    # destroy seed 30333 (of 0..30399): an ambiguous manifest create whose object a hard destroyer deleted
    # before the read-back; far beyond any budget.
    switches.SEQUENCED_GONE_RECREATED:
        "tests/manifest/test_gone_is_taken.py::test_with_the_switch_the_create_lands_again_on_the_destroyed_database",
    # A thread race (writer.md step 7's kick): no simulated writer, one thread, can enter its window.
    switches.KICK_SKIPS_IDLE_FLUSHER:
        "tests/db/test_durable_wait_idle_flusher.py::test_without_the_idle_wake_the_durable_wait_never_returns",
}

#: Known bug classes whose code does not exist yet (``sim bugs`` shows them); each leaves the list when the issue
#: that builds it gives it an entry (as gc-*, projection-*/union-*/clone-*, expired-checkpoint-fatal did).
PLANNED: tuple[tuple[str, str], ...] = (
    ("Reader sets wal_id_last_seen to a WAL id GC already deleted", "reader (READ-1/2)"),
    ("Stalled WAL writer re-creates a WAL id GC deleted (RFC 004's shape for WAL ids)", "gc (DUR-1)"),
)
