/*
 * Destroying a database (RFC 000 "Deleting a Database", "Garbage Collector";
 * spec/protocols/destroy.md).
 *
 * Database A is destroyed softly while an old writer (epoch 1) keeps writing WAL
 * objects and a new writer tries to open: the destroyer bumps the epoch, writes
 * its fence at the first free WAL id, then marks destroyed_at_s in a manifest
 * write that only lands while its epoch is still the latest.
 *
 * Database C (a clone, holding a final checkpoint on its parent) is destroyed
 * hard while a user may add a checkpoint to it: the destroyer checks for active
 * checkpoints and marks destroyed_at_s in one CAS, releases the final
 * checkpoint, deletes C's objects and then its latest manifest. It may crash
 * after any step and is then run again.
 *
 * Bounds: WAL ids 1..4, 2 objects besides C's manifest, 1 crash.
 * Unsafe variants:
 *   UNSAFE_SOFT_NO_FENCE          - soft destroy marks without fencing the WAL.
 *   UNSAFE_OPEN_IGNORES_DESTROYED - a writer opens a destroyed database.
 *   UNSAFE_HARD_CHECK_OUTSIDE_CAS - the checkpoint check is a read before the mark.
 *   UNSAFE_DELETE_MANIFEST_FIRST  - the latest manifest goes before the other objects.
 *   UNSAFE_RELEASE_AFTER_DELETE   - the parent's final checkpoint is released last.
 */
#define NWAL 4
#define FENCE 100

/* database A (soft) */
byte a_epoch = 1;
bool a_destroyed = false;
byte wal[NWAL + 3];          /* 0 free, 1 old writer's data, FENCE destroyer's fence */

/* database C (hard) */
bool c_ckpt = false;         /* an active user checkpoint on C */
bool c_destroyed = false;
byte c_objs = 2;             /* objects other than the latest manifest */
bool c_manifest = true;
bool p_final = true;         /* C's final checkpoint on its parent */
byte crashes = 0;

proctype OldWriter() {       /* epoch 1: appends WAL objects until fenced */
  byte n = 1;
  do
  :: n <= NWAL ->
     if
     :: d_step { wal[n] == 0 ->
          assert(!a_destroyed);                                        /* DESTROY-2 */
          wal[n] = 1 };
        n++
     :: d_step { wal[n] != 0 } -> break                                /* fenced: halt */
     fi
  :: else -> break
  od
}

proctype NewWriter() {       /* Db.open: the epoch bump is a CAS on the manifest */
  d_step {
#ifndef UNSAFE_OPEN_IGNORES_DESTROYED
    if :: !a_destroyed ->
#else
    if :: true ->
#endif
       assert(!a_destroyed);                                           /* DESTROY-3 */
       a_epoch++
    :: else -> skip                                                    /* InvalidDbState */
    fi
  }
}

proctype SoftDestroyer() {
  byte my, n;
retry: skip;
  d_step { a_epoch++; my = a_epoch };
#ifndef UNSAFE_SOFT_NO_FENCE
  n = 1;
  do
  :: d_step { n <= NWAL + 2 && wal[n] == 0 -> wal[n] = FENCE } -> break
  :: d_step { n <= NWAL + 2 && wal[n] != 0 -> n++ }
  od;
#endif
  if
  :: d_step { a_epoch == my -> a_destroyed = true }
  :: d_step { a_epoch != my } -> goto retry                            /* a newer writer: claim again */
  fi
}

proctype Checkpointer() {    /* a user's create_checkpoint on C (CAS, refuses destroyed) */
  d_step { if :: !c_destroyed -> c_ckpt = true :: else -> skip fi };
  if :: c_ckpt = false :: skip fi                                      /* maybe deleted later */
}

inline maybe_crash() {
  if :: crashes < 1 -> crashes++; goto start :: true -> skip fi
}

proctype HardDestroyer() {
  bool refused = false;
start: skip;
  if :: !c_manifest -> goto done :: else -> skip fi;
#ifndef UNSAFE_HARD_CHECK_OUTSIDE_CAS
  d_step { if :: c_ckpt -> refused = true :: else -> c_destroyed = true fi };  /* check + mark: one CAS */
#else
  refused = c_ckpt;
  if :: !refused -> c_destroyed = true :: else -> skip fi;
#endif
  if :: refused -> goto done :: else -> skip fi;
  maybe_crash();
#ifndef UNSAFE_RELEASE_AFTER_DELETE
  p_final = false;
  maybe_crash();
#endif
#ifdef UNSAFE_DELETE_MANIFEST_FIRST
  d_step { assert(c_objs == 0); c_manifest = false };                  /* DESTROY-4 */
#endif
  do
  :: c_objs > 0 ->
     d_step { assert(!c_ckpt); c_objs-- };                             /* DESTROY-1 */
     maybe_crash()
  :: else -> break
  od;
  skip;
#ifdef UNSAFE_RELEASE_AFTER_DELETE
  d_step { assert(!p_final); c_manifest = false };                     /* DESTROY-5 */
  p_final = false;
#else
  d_step {
    assert(c_objs == 0);                                               /* DESTROY-4 */
    assert(!p_final);                                                  /* DESTROY-5 */
    c_manifest = false
  };
#endif
done:
  skip
}

init {
  atomic {
    run OldWriter(); run NewWriter(); run SoftDestroyer();
    run Checkpointer(); run HardDestroyer()
  }
}
