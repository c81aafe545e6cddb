/*
 * Sequenced metadata (.manifest / .compactions) with create-if-absent CAS, GC and
 * the GC boundary file (RFC 004, "Motivation", "Advancing Boundaries",
 * "Checking Boundaries After Writes").
 *
 * Writer A reads the latest file N and prepares N+1; it may stall for any
 * number of steps (the model does not bound the stall, which is exactly a stall
 * longer than min_age).  Writer B keeps committing.  GC advances the boundary
 * to the newest non-latest file and deletes files at or behind it.  The safe
 * writer reads the boundary after its create succeeds and treats an id at or
 * behind it as failed (ObjectVersionBehindBoundary).
 *
 * Bounds: ids 1..MAXID (file 1 exists initially), two writers with NA and NB
 * attempts, GC with NGC rounds.
 * Unsafe variants:
 *   UNSAFE_NO_BOUNDARY_CHECK  - writer returns success right after the create.
 *   UNSAFE_GC_DELETE_FIRST    - GC deletes old files before advancing the boundary.
 */
#define MAXID 5
#define NA    1
#define NB    3
#define NGC   2

bool exists[MAXID + 2];
byte committed_by[MAXID + 2];  /* writer that was told "committed" for id */
byte boundary = 0;             /* gc/<ns>.boundary (missing file reads 0)  */
byte max_created = 1;          /* highest id ever created (file 1 exists)  */

inline latest(l) {
  l = MAXID + 1;
  do :: l > 0 && !exists[l] -> l-- :: else -> break od
}

proctype Writer(byte me; byte attempts) {
  byte l, id, b, tries = 0;
  bool fresh;
  do
  :: tries < attempts ->
     tries++;
     d_step { latest(l); id = l + 1 }        /* read latest N, prepare N+1 */
     if :: id > MAXID -> break :: else fi;
     /* ... the writer may stall here for arbitrarily long ... */
     if
     :: d_step { !exists[id] ->                        /* create-if-absent ok */
                  fresh = (id > max_created); exists[id] = true;
                  if :: fresh -> max_created = id :: else fi }
#ifndef UNSAFE_NO_BOUNDARY_CHECK
        b = boundary;                                  /* read boundary after */
        if
        :: id <= b -> skip                             /* behind boundary: failed */
        :: else ->
#endif
           d_step {
             assert(b < id);                           /* BOUNDARY-3 */
             assert(committed_by[id] == 0);            /* SEQMETA-1 */
             assert(fresh);                            /* SEQMETA-2 */
             committed_by[id] = me
           }
#ifndef UNSAFE_NO_BOUNDARY_CHECK
        fi
#endif
     :: d_step { exists[id] -> skip }                  /* lost the race: retry */
     fi
  :: else -> break
  od;
}

proctype GC() {
  byte r = 0, l, desired, i, old;
  do
  :: r < NGC ->
     r++;
     d_step {                       /* list; drop the latest; max of the rest */
       latest(l); desired = 0; i = 1;
       do
       :: i < l -> if :: exists[i] -> desired = i :: else fi; i++
       :: else -> break
       od;
       i = 0
     }
#ifndef UNSAFE_GC_DELETE_FIRST
     if                             /* advance: conditional, monotonic */
     :: desired > boundary ->
        d_step { old = boundary; boundary = desired; assert(boundary >= old) } /* BOUNDARY-2 */
     :: else
     fi;
#endif
     i = 1;
     do
     :: i < l ->
        if
        :: exists[i] && i <= desired ->
           d_step {
             assert(i <= boundary);                    /* BOUNDARY-1 */
             latest(old);
             assert(i < old);                          /* SEQMETA-3 */
             exists[i] = false; old = 0
           }
        :: else
        fi;
        i++
     :: else -> break
     od;
#ifdef UNSAFE_GC_DELETE_FIRST
     if :: desired > boundary -> boundary = desired :: else fi;
#endif
     i = 0
  :: r < NGC -> r++                 /* nothing old enough this round */
  :: else -> break
  od;
}

init {
  exists[1] = true;
  atomic { run Writer(1, NA); run Writer(2, NB); run GC() }
}
