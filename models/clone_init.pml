/*
 * Clone initialisation against a live parent (RFC 000 "Clones", "Garbage
 * Collector"; format doc section 1: WAL SSTs in (replay_after_wal_id,
 * wal_id_last_seen] are copied into the clone).
 *
 * The parent's manifest 1 lists SSTs {1,2}, replay_after_wal_id = 1 and
 * wal_id_last_seen = 3; WAL objects 1..4 exist (4 was written after manifest 1).
 * The clone is opened from an ephemeral source checkpoint S on manifest 1 that
 * may expire at any moment.  The clone writes its manifest (initialized=false,
 * external_dbs -> parent with final_checkpoint_id F), creates F in the parent
 * from S (a CAS on the parent manifest; fails if S is gone), copies the WAL
 * range, sets initialized=true and then reads the parent SSTs it references.
 * Meanwhile the parent compacts {1,2} into {3} and its GC deletes SSTs that
 * neither the latest manifest nor a live checkpoint references.
 *
 * Bounds: parent manifests 1..3, SSTs 1..3, WAL ids 1..4, GC 2 rounds.
 * Unsafe variants:
 *   UNSAFE_CLONE_NO_FINAL_CHECKPOINT - initialise without creating F.
 *   UNSAFE_CLONE_COPY_ALL_WAL        - copy every parent WAL id above replay_after.
 */
#define BIT(s) (1 << (s))
#define HAS(m, s) (((m) >> (s)) & 1)
#define REPLAY_AFTER 1
#define LAST_SEEN    3
#define NWAL         4

byte p_latest = 1;           /* latest parent manifest id                   */
byte p_ssts[4];              /* SST bitmask of parent manifest v            */
byte ck_src = 1;             /* manifest id of source checkpoint S (0 gone) */
byte ck_fin = 0;             /* manifest id of final checkpoint F (0 none)  */
bool sst_exists[4];
byte c_ssts = 0;             /* parent SSTs referenced by the clone manifest */
bool c_written = false, c_init = false;
byte c_wal = 0;              /* WAL ids copied into the clone               */

proctype Clone() {
  byte src, s;
  d_step { src = ck_src };                /* resolve S in the parent manifest */
  if :: src == 0 -> goto out :: else fi;
  d_step { c_ssts = p_ssts[src]; c_written = true };   /* clone manifest, initialized=false */
#ifndef UNSAFE_CLONE_NO_FINAL_CHECKPOINT
  d_step {                                /* create F from S (parent CAS) */
    if
    :: ck_src == 0 -> src = 0             /* S expired: clone fails, retry later */
    :: else -> ck_fin = ck_src;
               assert(ck_fin == src)                                   /* CLONE-1 */
    fi
  };
  if :: src == 0 -> goto out :: else fi;
#endif
  s = REPLAY_AFTER + 1;                   /* copy the WAL range */
#ifdef UNSAFE_CLONE_COPY_ALL_WAL
  do
  :: s <= NWAL ->
#else
  do
  :: s <= LAST_SEEN ->
#endif
     d_step {
       assert(s > REPLAY_AFTER && s <= LAST_SEEN);                     /* CLONE-3 */
       c_wal = c_wal | BIT(s); s++
     }
  :: else -> break
  od;
  c_init = true;
  s = 1;                                  /* serve reads from parent SSTs */
  do
  :: s <= 3 ->
     if :: HAS(c_ssts, s) -> assert(sst_exists[s])                     /* CLONE-2 */
        :: else fi;
     s++
  :: else -> break
  od;
out:
  skip
}

proctype ParentCompactor() {
  sst_exists[3] = true;
  d_step { p_latest++; p_ssts[p_latest] = BIT(3) }
}

proctype ParentExpiry() {
  ck_src = 0                              /* the ephemeral checkpoint expires */
}

proctype ParentGC() {
  byte r = 0, live, s;
  do
  :: r < 2 ->
     r++;
     d_step {
       live = p_ssts[p_latest];
       if :: ck_src != 0 -> live = live | p_ssts[ck_src] :: else fi;
       if :: ck_fin != 0 -> live = live | p_ssts[ck_fin] :: else fi
     };
     s = 1;
     do
     :: s <= 2 ->                        /* SSTs 1,2 are old; 3 is young */
        if
        :: sst_exists[s] && !HAS(live, s) ->
           d_step {
             assert(!(c_init && HAS(c_ssts, s)));                     /* CLONE-2 */
             sst_exists[s] = false
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
    p_ssts[1] = BIT(1) | BIT(2);
    sst_exists[1] = true; sst_exists[2] = true;
    run Clone(); run ParentCompactor(); run ParentExpiry(); run ParentGC()
  }
}
