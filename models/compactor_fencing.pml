/*
 * Compactor fencing across two files and the compaction lifecycle
 * (RFC 002 "Protocol for State Management of Manifest and CompactionState":
 *  "On startup...", "On compaction job creation...", "On compaction job
 *  progress...", "On compaction job complete..."; "Resuming Partial Compactions";
 *  RFC 003 "Compactor" / Compaction Executor epoch checks).
 *
 * Two compactors C1 and C2 (C2 is a replacement that may start at any moment
 * while C1 keeps running as a possible zombie).  On startup a compactor picks
 * epoch = manifest.compactor_epoch + 1 and writes it to the next .manifest,
 * then to the next .compactions (flipping Running back to Submitted).  One job
 * J (inputs: the L0 SSTs of manifest 1) goes Submitted -> Running -> Compacted
 * -> Completed: the worker's result is Compacted; the coordinator's finish
 * writes the .manifest (inputs replaced by J's output) and then the .compactions
 * file with Completed.  A restart flips Running back to Submitted (the reclaim)
 * and keeps Compacted; a resumed Submitted job whose inputs are gone fails
 * validation; a Compacted job is first looked for in the latest manifest (its
 * output already there: Completed with no manifest write, COMPACT-10), then
 * validated (inputs gone: Failed), then committed.
 * Every write is create-if-absent at latest+1 and first compares the epoch in
 * the latest file with its own (greater: fenced, die).
 *
 * Bounds: 2 compactors, 1 job, .manifest ids <= MAXM, .compactions ids <= MAXC.
 * Unsafe variants:
 *   UNSAFE_NO_SECOND_BUMP            - startup bumps only the .manifest epoch.
 *   UNSAFE_NO_REVALIDATE_AT_COMMIT   - the finish commits without re-reading
 *                                      the manifest (catalogued compaction-no-revalidate).
 *   UNSAFE_COMPACTIONS_BEFORE_MANIFEST - completion writes .compactions first.
 *   UNSAFE_RECOMMIT_VALIDATES_FIRST  - the commit validates the inputs before
 *                                      looking for its output (the order before
 *                                      COMPACT-10, catalogued compaction-recommit-fails).
 */
#define MAXM 6
#define MAXC 9

#define NONE      0
#define SUBMITTED 1
#define RUNNING   2
#define COMPLETED 3
#define FAILED    4
#define COMPACTED 5

bool m_exists[MAXM + 2];
byte m_cepoch[MAXM + 2];     /* compactor_epoch field of .manifest v        */
bool m_inputs[MAXM + 2];     /* J's input SSTs are listed in .manifest v    */
bool m_output[MAXM + 2];     /* J's output SR is listed in .manifest v      */
bool c_exists[MAXC + 2];
byte c_cepoch[MAXC + 2];     /* compactor_epoch field of .compactions v     */
byte c_status[MAXC + 2];     /* status of J recorded in .compactions v      */
byte started_max = 0;        /* highest epoch that completed startup        */
byte started_set = 0;        /* bitmask of epochs that completed startup    */
byte output_commits = 0;     /* .manifest creates that committed J's output */

inline latest_m(l) { l = MAXM + 1; do :: l > 0 && !m_exists[l] -> l-- :: else -> break od }
inline latest_c(l) { l = MAXC + 1; do :: l > 0 && !c_exists[l] -> l-- :: else -> break od }

/* COMPACT-1: legal status transitions (Completed and Failed are terminal) */
#define LEGAL(a, b) ((a) == (b) || ((a) == NONE && (b) == SUBMITTED) || \
                     ((a) == SUBMITTED && ((b) == RUNNING || (b) == FAILED)) || \
                     ((a) == RUNNING && ((b) == SUBMITTED || (b) == COMPACTED)) || \
                     ((a) == COMPACTED && ((b) == COMPLETED || (b) == FAILED)))

/* write .manifest latest+1 with epoch e; commit = also replace J's inputs by its output */
inline write_manifest(commit) {
  do
  :: skip; d_step { latest_m(v); if :: m_cepoch[v] > e -> dead = true :: else fi };
     if :: dead || v >= MAXM -> break :: else fi;
     if
     :: d_step {
          !m_exists[v + 1] ->
          assert(e >= started_max);                               /* CFENCE-1 */
          m_exists[v + 1] = true; m_cepoch[v + 1] = e;
          m_inputs[v + 1] = m_inputs[v]; m_output[v + 1] = m_output[v];
          if
          :: commit ->
             assert(output_commits == 0 && m_inputs[v]);          /* COMPACT-3 */
             output_commits++; m_inputs[v + 1] = false; m_output[v + 1] = true
          :: else
          fi
        }; break
     :: d_step { m_exists[v + 1] -> skip }                        /* lost race: re-read */
     fi
  od
}

/* write .compactions latest+1 with epoch e and J's status st */
inline write_compactions(st) {
  do
  :: skip; d_step {
       latest_c(c);
       if
       :: c_cepoch[c] > e -> dead = true
#ifndef UNSAFE_NO_SECOND_BUMP
       :: c_cepoch[c] < e -> assert(false)                       /* CFENCE-3 */
#endif
       :: else
       fi
     };
     if :: dead || c >= MAXC -> break :: else fi;
     if
     :: d_step {
          !c_exists[c + 1] ->
          assert(e >= started_max);                               /* CFENCE-2 */
          assert(LEGAL(c_status[c], st));                         /* COMPACT-1 */
          latest_m(v);
          assert(st != COMPLETED || m_output[v]);                 /* COMPACT-2 */
          assert(st != FAILED || !m_output[v]);                   /* COMPACT-10 */
          c_exists[c + 1] = true; c_cepoch[c + 1] = e; c_status[c + 1] = st
        }; break
     :: d_step { c_exists[c + 1] -> skip }                        /* lost race: reconcile */
     fi
  od
}

proctype Compactor() {
  byte e, v, c, st;
  bool dead = false;
  /* ---- startup: fence on .manifest, then on .compactions ---- */
  d_step { latest_m(v); e = m_cepoch[v] + 1 };
  do
  :: v >= MAXM -> goto out
  :: d_step { !m_exists[v + 1] -> m_exists[v + 1] = true; m_cepoch[v + 1] = e;
                m_inputs[v + 1] = m_inputs[v]; m_output[v + 1] = m_output[v] }; break
  :: d_step { v < MAXM && m_exists[v + 1] -> latest_m(v);
                if :: m_cepoch[v] >= e -> dead = true :: else fi };   /* fenced */
     if :: dead -> goto out :: else fi
  od;
#ifndef UNSAFE_NO_SECOND_BUMP
  do
  :: skip; d_step {
       latest_c(c);
       if
       :: c_cepoch[c] > e -> dead = true
       :: c_cepoch[c] == e -> assert(false)                      /* CFENCE-3 */
       :: else
       fi
     };
     if :: dead || c >= MAXC -> goto out :: else fi;
     if
     :: d_step { !c_exists[c + 1] ->
                 c_exists[c + 1] = true; c_cepoch[c + 1] = e;
                 st = c_status[c]; if :: st == RUNNING -> st = SUBMITTED :: else fi;
                 assert(LEGAL(c_status[c], st));                  /* COMPACT-1 */
                 c_status[c + 1] = st }; break
     :: d_step { c_exists[c + 1] -> skip }
     fi
  od;
#endif
  skip; d_step {
    assert((started_set & (1 << e)) == 0);                        /* CFENCE-3 */
    started_set = started_set | (1 << e);
    if :: e > started_max -> started_max = e :: else fi
  };
  /* ---- work on J ---- */
  d_step { latest_c(c); st = c_status[c] };
  if
  :: st == COMPACTED -> goto finish      /* a result left by a stopped coordinator */
  :: st == NONE -> write_compactions(SUBMITTED); if :: dead -> goto out :: else fi
  :: st == SUBMITTED
  :: else -> goto out                    /* finished, or someone else's Running */
  fi;
  d_step { latest_m(v) };                /* validate the spec against the manifest */
  if
  :: !m_inputs[v] -> write_compactions(FAILED); goto out
  :: else
  fi;
  write_compactions(RUNNING); if :: dead -> goto out :: else fi;
  /* ... the executor merges the inputs and writes the output SR ... */
  write_compactions(COMPACTED); if :: dead -> goto out :: else fi;
finish:
  skip;
  /* the coordinator's finish: look for the output, validate, commit (COMPACT-10) */
  d_step { latest_m(v) };
#ifndef UNSAFE_NO_REVALIDATE_AT_COMMIT
#ifndef UNSAFE_RECOMMIT_VALIDATES_FIRST
  if
  :: m_output[v] -> write_compactions(COMPLETED); goto out   /* committed before a restart */
  :: else
  fi;
#endif
  if
  :: !m_inputs[v] -> write_compactions(FAILED); goto out
  :: else
  fi;
#endif
#ifndef UNSAFE_COMPACTIONS_BEFORE_MANIFEST
  write_manifest(true); if :: dead -> goto out :: else fi;
  write_compactions(COMPLETED);
#else
  write_compactions(COMPLETED); if :: dead -> goto out :: else fi;
  write_manifest(true);
#endif
out:
  skip
}

init {
  atomic {
    m_exists[1] = true; m_inputs[1] = true;
    c_exists[1] = true; c_status[1] = NONE;
    run Compactor(); run Compactor()
  }
}
