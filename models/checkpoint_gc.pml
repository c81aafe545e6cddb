/*
 * Checkpoint-aware garbage collection against a reader and a compaction
 * (RFC 000 "Readers" / "Establishing the Checkpoint" / "Garbage Collector";
 * RFC 001 "Snapshots"; RFC 002 "Garbage Collection Integration").
 *
 * Manifest 1 lists L0 SSTs {1,2}.  A reader pins the current state by writing
 * manifest V+1 that carries a checkpoint on V+1 (CAS; retry on conflict), then
 * reads every SST of its checkpointed manifest and finally removes the
 * checkpoint.  A compactor reads manifest V, reads its inputs, writes output SST
 * 3 and commits manifest V+1 = {3} (carrying V's checkpoint along).  GC reads
 * the latest manifest, computes the live set (latest manifest + manifests of
 * its checkpoints), and deletes unreferenced manifests and old unreferenced SSTs.
 *
 * Time is abstracted: an SST is "old" (older than min_age) only once it has
 * been committed to a manifest (the model assumes a compaction commits within
 * min_age, RFC 000 GC "older than min_age"), and a GC round decides what is old
 * when it reads the manifest (a GC round itself is shorter than min_age).
 *
 * Bounds: 4 SST ids, manifests 1..MAXM, reader and compactor 2 CAS attempts
 * each, GC NGC rounds.
 * Unsafe variants:
 *   UNSAFE_GC_IGNORES_CHECKPOINTS - live set = latest manifest only.
 *   UNSAFE_GC_IGNORES_MIN_AGE     - GC also deletes young (uncommitted) SSTs.
 */
#define MAXM 6
#define NGC  2
#define BIT(s) (1 << (s))
#define HAS(m, s) (((m) >> (s)) & 1)

bool man_exists[MAXM + 2];
byte man_ssts[MAXM + 2];     /* bitmask of SST ids referenced by manifest v */
byte man_ckpt[MAXM + 2];     /* manifest id of the (reader) checkpoint in v */
bool sst_exists[5];
bool sst_old[5];

inline latest(l) {
  l = MAXM + 1;
  do :: l > 0 && !man_exists[l] -> l-- :: else -> break od
}

/* every SST of the latest manifest and of its checkpointed manifest exists */
inline check_latest_live() {
  latest(t);
  s = 1;
  do
  :: s <= 4 ->
     assert(!HAS(man_ssts[t], s) || sst_exists[s]);                      /* GC-4 */
     assert(man_ckpt[t] == 0 || !HAS(man_ssts[man_ckpt[t]], s) || sst_exists[s]); /* CKPT-2 */
     s++
  :: else -> break
  od;
  s = 0; t = 0
}

proctype Reader() {
  byte v, l, cp = 0, s, t, tries = 0;
  do                                      /* establish the checkpoint */
  :: tries < 2 ->
     tries++;
     d_step { latest(v) };
     d_step {
       latest(l);
       if
       :: l == v && v < MAXM ->           /* CAS: write v+1 with checkpoint on v+1 */
          man_exists[v + 1] = true; man_ssts[v + 1] = man_ssts[v];
          man_ckpt[v + 1] = v + 1; cp = v + 1
       :: else
       fi
     };
     if :: cp != 0 -> break :: else fi
  :: else -> break
  od;
  if :: cp == 0 -> goto out :: else fi;
  s = 1;                                  /* read through the checkpoint */
  do
  :: s <= 4 ->
     if
     :: HAS(man_ssts[cp], s) -> assert(sst_exists[s])                  /* CKPT-1 */
     :: else
     fi;
     s++
  :: else -> break
  od;
  do                                      /* release the checkpoint (CAS loop) */
  :: d_step {
       latest(l);
       if
       :: l < MAXM -> man_exists[l + 1] = true; man_ssts[l + 1] = man_ssts[l];
                      man_ckpt[l + 1] = 0
       :: else
       fi
     }; break
  od;
out:
  skip
}

proctype Compactor() {
  byte v, l, inputs, s, t, tries = 0;
  bool ok = false;
  do
  :: tries < 2 && !ok ->
     tries++;
     d_step { latest(v); inputs = man_ssts[v] };
     s = 1;                               /* read every input SST */
     do
     :: s <= 4 ->
        if :: HAS(inputs, s) -> assert(sst_exists[s])                   /* GC-3 */
           :: else fi;
        s++
     :: else -> break
     od;
     sst_exists[3] = true;                /* write output SST 3 (young) */
     d_step {
       latest(l);
       if
       :: l == v && v < MAXM && man_ssts[v] == inputs ->
          man_exists[v + 1] = true; man_ssts[v + 1] = BIT(3);
          man_ckpt[v + 1] = man_ckpt[v]; ok = true;
          check_latest_live()
       :: else
       fi
     }
  :: else -> break
  od;
  sst_old[3] = sst_exists[3]              /* committed (or abandoned): ages */
}

proctype GC() {
  byte r = 0, l, live, v, s, t, old;
  do
  :: r < NGC ->
     r++;
     d_step {
       latest(l);
       live = man_ssts[l];
#ifndef UNSAFE_GC_IGNORES_CHECKPOINTS
       if :: man_ckpt[l] != 0 -> live = live | man_ssts[man_ckpt[l]] :: else fi;
#endif
       old = 0; s = 1;
       do
       :: s <= 4 ->
#ifndef UNSAFE_GC_IGNORES_MIN_AGE
          if :: sst_old[s] -> old = old | BIT(s) :: else fi;
#else
          old = old | BIT(s);
#endif
          s++
       :: else -> break
       od
     };
     v = 1;                               /* delete garbage manifests */
     do
     :: v < l ->
        if
        :: man_exists[v] && man_ckpt[l] != v ->
           d_step {
             latest(t);
             assert(v != t && man_ckpt[t] != v);                       /* GC-2 */
             man_exists[v] = false; t = 0
           }
        :: else
        fi;
        v++
     :: else -> break
     od;
     s = 1;                               /* delete old unreferenced SSTs */
     do
     :: s <= 4 ->
        if
        :: sst_exists[s] && HAS(old, s) && !HAS(live, s) ->
           d_step {
             latest(t);
             assert(!HAS(man_ssts[t], s) && (man_ckpt[t] == 0 || !HAS(man_ssts[man_ckpt[t]], s))); /* GC-1 */
             sst_exists[s] = false; t = 0
           }
        :: else
        fi;
        s++
     :: else -> break
     od
  :: else -> break
  od
}

init {
  atomic {
    man_exists[1] = true; man_ssts[1] = BIT(1) | BIT(2);
    sst_exists[1] = true; sst_exists[2] = true;
    sst_old[1] = true; sst_old[2] = true;
    run Reader(); run Compactor(); run GC()
  }
}
