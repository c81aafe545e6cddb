/*
 * WAL fencing with writer epochs: three writers (RFC 001, "Writer Protocol").
 *
 * Each writer obtains a unique epoch through the manifest CAS (modelled as one
 * atomic increment of writer_epoch), lists the WAL, and writes an empty fence
 * object at the first free id with create-if-absent.  Losing the create to an
 * older writer means "move to the next id and retry"; the writer tells the two
 * apart by re-reading writer_epoch from the manifest (WAL objects carry no
 * epoch in the real format), and halts if the manifest holds a newer epoch.
 * After its fence lands it re-reads the manifest once more (a writer that got
 * its epoch before a newer writer but listed the WAL after that writer's fence
 * would otherwise fence "successfully" above it), replays every object below
 * the fence, and then writes and acknowledges data objects.
 *
 * Bounds: NW=3 writers, NSLOT WAL ids, NDATA data writes per writer.
 * Unsafe variant UNSAFE_SKIP_FENCE: the writer replays up to the listed
 * position and starts writing data without writing a fence first.
 * Unsafe variant UNSAFE_NO_EPOCH_RECHECK: no manifest re-read after the fence.
 * Unsafe variant UNSAFE_L0_UNFENCED: the L0 flush's manifest CAS does not compare
 * writer_epoch with the writer's own (FENCE-5; switch l0-commit-unfenced).
 */
#define NW     3
#define NSLOT  6
#define NDATA  1

byte wal_epoch[NSLOT];      /* 0 = absent, else epoch of the creator     */
bool wal_acked[NSLOT];      /* data object acknowledged to the client    */
byte epoch_ctr = 0;         /* writer_epoch in the latest manifest       */
byte fence_at[NW + 1];      /* per epoch: id of its fence (replay point)  */
bool opened[NW + 1];        /* per epoch: fence written, replay done      */
bool halted[NW + 1];        /* per epoch: lost a create to a newer epoch  */
bool l0_done[NW + 1];       /* per epoch: committed an L0 flush            */
byte done = 0;

/* create-if-absent of WAL object n by epoch e; checks FENCE-1/2/3/4 */
inline wal_create(n, e, ok, other, isfence) {
  d_step {
    assert(!halted[e]);                                   /* FENCE-3 */
    if
    :: wal_epoch[n] == 0 ->
       assert(n == 0 || wal_epoch[n - 1] != 0);           /* FENCE-1 */
       i = 1;
       do
       :: i <= NW ->
          assert(isfence || !(i > e && opened[i] && n >= fence_at[i])); /* FENCE-2 */
          i++
       :: else -> break
       od;
       wal_epoch[n] = e; ok = true; other = 0
    :: else ->
       ok = false; other = wal_epoch[n];
       assert(other != e && epoch_ctr >= e)                /* FENCE-4 */
    fi;
    i = 0
  }
}

proctype Writer() {
  byte e, n, other, k, i;
  bool ok;
  atomic { epoch_ctr++; e = epoch_ctr }    /* manifest CAS bumps writer_epoch */
  /* list the WAL: first absent id */
  d_step { n = 0; do :: n < NSLOT && wal_epoch[n] != 0 -> n++ :: else -> break od }
#ifndef UNSAFE_SKIP_FENCE
fence:
  if
  :: n >= NSLOT -> goto finish
  :: else
  fi;
  wal_create(n, e, ok, other, true);
  if
  :: ok -> n++
  :: else ->                       /* lost the slot: consult the manifest */
     if
     :: epoch_ctr > e -> halted[e] = true; goto finish   /* fenced */
     :: else -> n++; goto fence                           /* older writer: retry */
     fi
  fi;
#ifndef UNSAFE_NO_EPOCH_RECHECK
  /* the fence landed: re-read the manifest before replaying / acknowledging */
  if
  :: epoch_ctr > e -> halted[e] = true; goto finish
  :: else
  fi;
#endif
  d_step { fence_at[e] = n - 1; opened[e] = true };  /* replay ids < fence */
#else
  d_step { fence_at[e] = n; opened[e] = true };      /* replay up to listing, no fence */
#endif
  k = 0;
  do
  :: k < NDATA && n < NSLOT ->
     wal_create(n, e, ok, other, false);
     if
     :: ok -> wal_acked[n] = true; k++; n++
     :: else ->
        if
        :: epoch_ctr > e -> halted[e] = true; break      /* fenced */
        :: else -> n++                                   /* a zombie's empty fence */
        fi
     fi
  :: k > 0 && !l0_done[e] ->
     /* L0 flush: a manifest CAS (latest manifest read and written in one step) that
        must find writer_epoch still ours; a newer epoch halts the writer. */
     atomic {
#ifndef UNSAFE_L0_UNFENCED
       if
       :: epoch_ctr > e -> halted[e] = true
       :: else
       fi;
#endif
       if
       :: !halted[e] ->
          assert(epoch_ctr <= e);                          /* FENCE-5 */
          l0_done[e] = true
       :: else
       fi
     };
     if
     :: halted[e] -> break
     :: else
     fi
  :: else -> break
  od;
finish:
  done++
}

init {
  byte i, j;
  atomic { run Writer(); run Writer(); run Writer() }
  done == NW;
  /* DUR-1: every acknowledged object lies below the fence of every newer writer */
  d_step {
    i = 0;
    do
    :: i < NSLOT ->
       j = 1;
       do
       :: j <= NW ->
          assert(!(wal_acked[i] && opened[j] && j > wal_epoch[i] && i >= fence_at[j])); /* DUR-1 */
          j++
       :: else -> break
       od;
       i++
    :: else -> break
    od
  }
}
