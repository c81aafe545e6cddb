"""Known defects that ``slatedb check`` finds after tests which otherwise pass: each tolerated
by name (``@pytest.mark.check_allows(ID, reason=...)``) until the fix lands, never silently."""

#: Issue 25 item 1 (being fixed in the engine): our writer checkpoint survives an official
#: writer's open without its metadata and never expires; the next writer of ours adds another.
ORPHAN_WRITER_CHECKPOINT = ("switching engines orphans the writer checkpoint (the official engine rewrites it without "
                            "its WriterCheckpoint metadata; issue 25 item 1)")

#: Findings 2 and 3 (official wrong): the official union of projections sharing an SST repeats an
#: L0 view id, and the official compactor then loses one view's rows
#: (docs/official-defects/union_compaction_loses_rows.py).
OFFICIAL_UNION_REPEATS_VIEW_ID = ("the official 0.17 union lists one L0 view id twice (COMPACT-4); its compactor then keeps "
                                  "one view's rows only (docs/official-defects/union_compaction_loses_rows.py)")
