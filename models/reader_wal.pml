/*
 * DbReader establishing its checkpoint against a running writer and WAL GC
 * (RFC 001 "Reader Protocol" and its note on reading the manifest before
 * listing the WAL; RFC 000 "Establishing the Checkpoint" and "Garbage
 * Collector" step "Clean up WAL SSTs").
 *
 * The writer appends WAL objects 1..NWAL and now and then flushes L0, which
 * commits a manifest with a higher replay_after_wal_id R.  GC deletes WAL
 * objects that are <= R of the latest manifest and outside the range
 * (R_c, last_seen_c] of every checkpoint in it.  The reader reads the latest
 * manifest V, lists the WAL, and commits V+1 with wal_id_last_seen = the
 * highest listed id and a checkpoint on V+1 (CAS: retry if V is no longer the
 * latest); it then replays (R, wal_id_last_seen].
 *
 * Bounds: WAL ids 1..NWAL, manifests 1..MAXM, reader 2 attempts, GC 2 rounds.
 * Unsafe variant UNSAFE_GC_IGNORES_READER_CHECKPOINT: WAL GC deletes every id
 * <= R without keeping the ranges of checkpointed manifests.
 * (Listing the WAL before reading the manifest was also tried: with this GC
 * rule and wal_id_last_seen clamped to >= R it violates neither READ-1 nor
 * READ-2 within these bounds, so it is not registered as an unsafe variant.)
 */
#define NWAL 4
#define MAXM 6

bool wal_exists[NWAL + 1];
bool m_exists[MAXM + 2];
byte m_replay[MAXM + 2];     /* replay_after_wal_id of manifest v           */
byte m_ck_lo[MAXM + 2];      /* reader checkpoint in v: WAL range (lo, hi]  */
byte m_ck_hi[MAXM + 2];
bool m_ck[MAXM + 2];

inline latest(l) { l = MAXM + 1; do :: l > 0 && !m_exists[l] -> l-- :: else -> break od }
inline list_wal(h) { h = NWAL; do :: h > 0 && !wal_exists[h] -> h-- :: else -> break od }

proctype Writer() {
  byte n = 0, l;
  do
  :: n < NWAL -> n++; wal_exists[n] = true
  :: n > 0 ->                              /* flush L0 up to WAL id n */
     d_step {
       latest(l);
       if
       :: l < MAXM && m_replay[l] < n ->
          m_exists[l + 1] = true; m_replay[l + 1] = n;
          m_ck[l + 1] = m_ck[l]; m_ck_lo[l + 1] = m_ck_lo[l]; m_ck_hi[l + 1] = m_ck_hi[l]
       :: else
       fi
     };
     if :: n == NWAL -> break :: else fi
  od
}

proctype Reader() {
  byte v, l, r, h, i, tries = 0;
  bool ok = false;
  do
  :: tries < 2 && !ok ->
     tries++;
     d_step { latest(v); r = m_replay[v] };   /* manifest first, then list */
     d_step { list_wal(h) };
     if :: h < r -> h = r :: else fi;
     d_step {
       latest(l);
       if
       :: l == v && v < MAXM ->            /* CAS: V+1 with checkpoint, last_seen = h */
          m_exists[v + 1] = true; m_replay[v + 1] = r;
          m_ck[v + 1] = true; m_ck_lo[v + 1] = r; m_ck_hi[v + 1] = h; ok = true;
          i = r + 1;
          do
          :: i <= h -> assert(wal_exists[i]); i++                      /* READ-1 */
          :: else -> break
          od
       :: else
       fi
     }
  :: else -> break
  od;
  if
  :: ok ->
     i = r + 1;                             /* replay the WAL range */
     do
     :: i <= h -> assert(wal_exists[i]); i++                           /* READ-2 */
     :: else -> break
     od
  :: else
  fi
}

proctype GC() {
  byte rounds = 0, l, i;
  do
  :: rounds < 2 ->
     rounds++;
     d_step { latest(l) };
     i = 1;
     do
     :: i <= m_replay[l] ->
        if
#ifndef UNSAFE_GC_IGNORES_READER_CHECKPOINT
        :: wal_exists[i] && !(m_ck[l] && i > m_ck_lo[l] && i <= m_ck_hi[l]) ->
#else
        :: wal_exists[i] ->
#endif
           d_step { wal_exists[i] = false }
        :: else
        fi;
        i++
     :: else -> break
     od
  :: else -> break
  od
}

init {
  atomic { m_exists[1] = true; run Writer(); run Reader(); run GC() }
}
