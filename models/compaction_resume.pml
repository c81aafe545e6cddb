/*
 * Resuming a partial compaction from its last output SST (RFC 002 "Resuming
 * Partial Compactions": last_written_key_and_seq + ResumingIterator).
 *
 * Two sources are merged in (key ascending, seq descending) order: an older
 * sorted run A (seqs 3,2,1) and a newer L0 SST B (seqs 6,5,4); keys are chosen
 * nondeterministically from {1,2,3} (non-decreasing within a source), so a key
 * can have several versions and those versions can straddle an output SST
 * boundary.  The executor appends merged entries to output SSTs of SSTSZ (1 or
 * 2) entries; a finished SST is persisted (the .compactions progress update).
 * The compactor may crash at any step (up to MAXCRASH times): unpersisted
 * output is lost, and the resumed executor rebuilds its input iterators, seeks
 * to the last persisted (key, seq) and drains entries of that key while
 * seq >= last_seq.  The final output must equal the plain merge.
 *
 * Bounds: 3 entries per source, keys in 1..3, SST size 1..2, <= 2 crashes.
 * Unsafe variants:
 *   UNSAFE_RESUME_REEMIT   - drain only seq > last_seq (re-emits the last entry).
 *   UNSAFE_RESUME_SKIP_KEY - drain the whole last key (drops older versions of it).
 */
#define N        3
#define TOTAL    6
#define MAXCRASH 2
#define KEY(x)   ((x) / 8)
#define SEQ(x)   ((x) % 8)
/* x strictly before y in (key asc, seq desc) order */
#define BEFORE(x, y) (KEY(x) < KEY(y) || (KEY(x) == KEY(y) && SEQ(x) > SEQ(y)))

byte A[N], B[N];             /* entries encoded key*8+seq */
byte expect[TOTAL];          /* the merge without crashes */
byte out[TOTAL];             /* output rows, persisted prefix = out[0..persisted) */
byte out_len = 0, persisted = 0;

/* next entry of the merge; ia/ib advance */
inline pick(x) {
  if
  :: ia < N && (ib >= N || BEFORE(A[ia], B[ib])) -> x = A[ia]; ia++
  :: else -> x = B[ib]; ib++
  fi
}

/* ResumingIterator over one source: skip keys before last, drain the last key */
#define SRC(w, p) ((w) == 0 -> A[p] : B[p])
inline seek(w, p) {
  p = 0;
  do
  :: p < N && KEY(SRC(w, p)) < KEY(last) -> p++
#if defined(UNSAFE_RESUME_REEMIT)
  :: p < N && KEY(SRC(w, p)) == KEY(last) && SEQ(SRC(w, p)) > SEQ(last) -> p++
#elif defined(UNSAFE_RESUME_SKIP_KEY)
  :: p < N && KEY(SRC(w, p)) == KEY(last) -> p++
#else
  :: p < N && KEY(SRC(w, p)) == KEY(last) && SEQ(SRC(w, p)) >= SEQ(last) -> p++
#endif
  :: else -> break
  od
}

active proctype Executor() {
  byte i, k, x, last, sstsz, cur = 0, crashes = 0, ia = 0, ib = 0;
  /* nondeterministic inputs */
  k = 1;
  i = 0;
  do
  :: i < N -> if :: k < 3 -> k++ :: skip fi; A[i] = k * 8 + (3 - i); i++
  :: else -> break
  od;
  k = 1; i = 0;
  do
  :: i < N -> if :: k < 3 -> k++ :: skip fi; B[i] = k * 8 + (6 - i); i++
  :: else -> break
  od;
  if :: sstsz = 1 :: sstsz = 2 fi;
  skip; d_step {                       /* reference merge */
    i = 0;
    do :: i < TOTAL -> pick(x); expect[i] = x; i++ :: else -> break od;
    ia = 0; ib = 0; x = 0
  };
  do
  :: ia == N && ib == N -> persisted = out_len; break  /* inputs drained */
  :: (ia < N || ib < N) && out_len < TOTAL ->
     d_step {
       pick(x);
       assert(out_len == 0 || BEFORE(out[out_len - 1], x));        /* RESUME-2 */
       out[out_len] = x; out_len++; cur++;
       if
       :: cur == sstsz -> persisted = out_len; cur = 0   /* SST done: progress persisted */
       :: else
       fi;
     }
  :: (ia < N || ib < N) && crashes < MAXCRASH ->        /* crash and resume */
     d_step {
       crashes++; out_len = persisted; cur = 0;
       if
       :: persisted > 0 -> last = out[persisted - 1]; seek(0, ia); seek(1, ib)
       :: else -> ia = 0; ib = 0
       fi
     }
  od;
  /* RESUME-1: the output is exactly the merge of the inputs */
  skip; d_step {
    assert(out_len == TOTAL);                                        /* RESUME-1 */
    i = 0;
    do
    :: i < TOTAL -> assert(out[i] == expect[i]); i++                /* RESUME-1 */
    :: else -> break
    od
  }
}
