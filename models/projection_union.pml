/*
 * Manifest projection and union (RFC 000 "Manifest Projection and Union":
 * "Projection", "Union").
 *
 * Key space 0..3.  Database X has two L0 SSTs (newest first, seqs 2 and 1), each
 * physically holding every key of a nondeterministic range [lo, hi]; every
 * view starts with the full visible range.  Database Y has one SST with a
 * nondeterministic range and seq 1..3 (its last_l0_seq).  The model projects X
 * onto a nondeterministic [a, b) and checks reads; then it unions X projected
 * onto [0, m) with Y projected onto [m, 4) and checks reads and last_l0_seq.
 * A read of key k returns the seq of the first L0 view whose effective range
 * (physical range intersected with visible range) contains k, or 0.
 *
 * Bounds: 4 keys, 2 SSTs in X, 1 SST in Y, every split point.
 * Unsafe variants:
 *   UNSAFE_PROJECT_NO_NARROW - keep overlapping views without narrowing visible_range.
 *   UNSAFE_UNION_SEQ_FIRST   - union takes last_l0_seq of the first source only.
 */
#define NK 4
#define NV 3                 /* views per manifest (<= 2 + 1) */

typedef Manifest {
  byte n;                    /* number of L0 views, newest first */
  byte plo[NV]; byte phi[NV]; /* physical key range [plo, phi] of the viewed SST */
  byte vlo[NV]; byte vhi[NV]; /* visible range [vlo, vhi)                       */
  byte seq[NV];
  byte last_l0_seq
};

Manifest X, Y, P, Q, U;

inline choose_range(lo, hi) {
  if :: lo = 0 :: lo = 1 :: lo = 2 :: lo = 3 fi;
  hi = lo;
  do :: hi < NK - 1 -> hi++ :: break od
}

/* r = seq visible for key k in manifest M (0 = absent) */
#define EFF(M, i, k) ((k) >= M.plo[i] && (k) <= M.phi[i] && (k) >= M.vlo[i] && (k) < M.vhi[i])
inline read(M, k, r) {
  r = 0; j = 0;
  do
  :: j < M.n && r == 0 -> if :: EFF(M, j, k) -> r = M.seq[j] :: else fi; j++
  :: else -> break
  od
}

/* D = projection of S onto [a, b); append = add views to D's end */
inline project(S, D, a, b) {
  i = 0;
  do
  :: i < S.n ->
     lo = S.vlo[i]; hi = S.vhi[i];
     if :: S.plo[i] > lo -> lo = S.plo[i] :: else fi;
     if :: S.phi[i] + 1 < hi -> hi = S.phi[i] + 1 :: else fi;
     if :: a > lo -> lo = a :: else fi;
     if :: b < hi -> hi = b :: else fi;
     if
     :: lo < hi ->                          /* non-empty intersection: keep */
        D.plo[D.n] = S.plo[i]; D.phi[D.n] = S.phi[i]; D.seq[D.n] = S.seq[i];
#ifndef UNSAFE_PROJECT_NO_NARROW
        D.vlo[D.n] = lo; D.vhi[D.n] = hi;
#else
        D.vlo[D.n] = S.vlo[i]; D.vhi[D.n] = S.vhi[i];
#endif
        assert(D.vlo[D.n] >= S.vlo[i] && D.vhi[D.n] <= S.vhi[i]);          /* PROJ-2 */
        D.n++
     :: else                                /* outside the range: dropped */
     fi;
     i++
  :: else -> break
  od;
  if :: S.last_l0_seq > D.last_l0_seq -> D.last_l0_seq = S.last_l0_seq :: else fi
}

init {
  byte a, b, m, k, r1, r2, i, j, lo, hi;
  atomic {
  /* database X: two SSTs, newest first */
  X.n = 2; X.seq[0] = 2; X.seq[1] = 1; X.last_l0_seq = 2;
  choose_range(lo, hi); X.plo[0] = lo; X.phi[0] = hi; X.vlo[0] = 0; X.vhi[0] = NK;
  choose_range(lo, hi); X.plo[1] = lo; X.phi[1] = hi; X.vlo[1] = 0; X.vhi[1] = NK;
  /* database Y: one SST */
  Y.n = 1; choose_range(lo, hi); Y.plo[0] = lo; Y.phi[0] = hi; Y.vlo[0] = 0; Y.vhi[0] = NK;
  if :: Y.seq[0] = 1 :: Y.seq[0] = 2 :: Y.seq[0] = 3 fi; Y.last_l0_seq = Y.seq[0];
  /* projection of X onto [a, b) */
  if :: a = 0 :: a = 1 :: a = 2 :: a = 3 fi;
  b = a + 1; do :: b < NK -> b++ :: break od
  };
  d_step {
    project(X, P, a, b);
    k = 0;
    do
    :: k < NK ->
       read(P, k, r1); read(X, k, r2);
       assert(r1 == (k >= a && k < b -> r2 : 0));                            /* PROJ-1 */
       k++
    :: else -> break
    od
  };
  /* union of X|[0,m) and Y|[m,NK) */
  if :: m = 1 :: m = 2 :: m = 3 fi;
  skip; d_step {
    P.n = 0; P.last_l0_seq = 0; Q.n = 0; Q.last_l0_seq = 0;
    project(X, P, 0, m); project(Y, Q, m, NK);
    /* union: sources ordered by start key; views copied in source order */
    U.n = 0; i = 0;
    do
    :: i < P.n -> U.plo[U.n] = P.plo[i]; U.phi[U.n] = P.phi[i]; U.vlo[U.n] = P.vlo[i];
                  U.vhi[U.n] = P.vhi[i]; U.seq[U.n] = P.seq[i]; U.n++; i++
    :: else -> break
    od;
    i = 0;
    do
    :: i < Q.n -> U.plo[U.n] = Q.plo[i]; U.phi[U.n] = Q.phi[i]; U.vlo[U.n] = Q.vlo[i];
                  U.vhi[U.n] = Q.vhi[i]; U.seq[U.n] = Q.seq[i]; U.n++; i++
    :: else -> break
    od;
#ifndef UNSAFE_UNION_SEQ_FIRST
    U.last_l0_seq = (P.last_l0_seq > Q.last_l0_seq -> P.last_l0_seq : Q.last_l0_seq);
#else
    U.last_l0_seq = P.last_l0_seq;
#endif
    k = 0;
    do
    :: k < NK ->
       read(U, k, r1);
       if :: k < m -> read(X, k, r2) :: else -> read(Y, k, r2) fi;
       assert(r1 == r2);                                                      /* PROJ-4 */
       k++
    :: else -> break
    od;
    /* the first write after the union gets last_l0_seq + 1 */
    i = 0;
    do
    :: i < X.n -> assert(U.last_l0_seq + 1 > X.seq[i]); i++                 /* PROJ-3 */
    :: else -> break
    od;
    i = 0;
    do
    :: i < Y.n -> assert(U.last_l0_seq + 1 > Y.seq[i]); i++                 /* PROJ-3 */
    :: else -> break
    od
  }
}
