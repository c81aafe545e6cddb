# Recipes run through ./just, which sets up .venv and puts it first on PATH.
set shell := ["bash", "-euo", "pipefail", "-c"]
set positional-arguments

python := ".venv/bin/python"

# List the recipes.
default:
    @just --list

# The whole test suite: the Spin models' table, then pytest (both must pass).
test *args: models
    {{python}} -m pytest -n 2 --dist loadgroup -q {{args}}

# Only pytest, with any arguments (e.g. ./just pytest tests/objstore -x).
pytest *args:
    {{python}} -m pytest {{args}}

# Check every Promela model and its unsafe variants with Spin; prints a table.
models:
    {{python}} models/run.py

# Regenerate the FlatBuffers Python code from spec/format/*.fbs with the pinned flatc.
gen *args:
    {{python}} -m slatedb.format.gen {{args}}

# The main job: every registered simulation scenario, a fixed seed plan (the same seeds on any machine;
# about 9 minutes on 2 idle cores), one table and a replay command per failing seed
# (--quick: the 30 s plan; --cap-minutes N: fail if the plan is not done by then; --minutes N: a soak).
[doc("The main job: every registered simulation scenario, a fixed seed plan (~9 min idle), a table and replay commands (--quick: ~30 s).")]
dst *args:
    .venv/bin/sim dst "$@"

# Run the simulator CLI (e.g. ./just sim run --seed 7, ./just sim sweep --seeds 0..999 --jobs 2).
sim *args:
    .venv/bin/sim {{args}}

# The db scenario over a fixed set of seeds (0..49), one after another, pinned to one CPU
# (target >= 1000x; see docs/simulation.md).
# Simulator throughput on one core: virtual s per wall s and seeds/minute.
[doc("Simulator throughput on one core: virtual s per wall s and seeds/minute (db scenario, seeds 0..49).")]
sim-bench *args:
    .venv/bin/sim bench {{args}}

# e.g. ./just sim-spark --seeds 0..999 --workload db --parquet sim-results.parquet
# A campaign as Spark tasks (local[*] unless --master URL), one Parquet row per seed.
[doc("A campaign as Spark tasks (local[*] unless --master URL), one Parquet row per seed.")]
sim-spark *args:
    .venv/bin/sim sweep --engine spark {{args}}

# Mutation testing of the protocol modules: cosmic-ray's operators, each mutant judged in a copy of
# the tree by a campaign over every scenario plus its package's tests (e.g. ./just mutate --sample 6
# --jobs 2; ./just mutate --mutant ID replays one; see docs/simulation.md).
[doc("Mutation testing of the protocol modules (e.g. ./just mutate --sample 6 --jobs 2; see docs/simulation.md).")]
mutate *args:
    .venv/bin/sim mutate "$@"

# The differential campaign against the official wheel: seeded operation sequences on a shared
# store (engines switched, killed, reopened) and on twin stores, reads compared with a model and
# between engines, slatedb check after every step, mismatches shrunk (e.g. ./just diff --seeds 0..99).
[doc("Differential campaign against the official wheel (e.g. ./just diff --seeds 0..99).")]
diff *args:
    {{python}} -m sim.diff "$@"

# Run the admin CLI.
slatedb *args:
    .venv/bin/slatedb {{args}}

# SST codec benchmark (build MB/s, lookups/s, iteration rows/s).
bench-format *args:
    {{python}} -m slatedb.bench.format {{args}}

# Compaction benchmark: merge MB/s and rows/s of 8 L0 SSTs, write amplification of a sustained run.
bench-compaction *args:
    {{python}} -m slatedb.bench.compaction {{args}}

# Side-by-side Db benchmark: ours vs the official wheel, sqlite3, plyvel, rocksdict and lmdb, pinned
# to one CPU (e.g. ./just bench --runs 1 --n 10000); --scale: the scale curve at 100k, 1M and 10M
# keys (--scale-sizes, --scale-engines; see docs/benchmarks.md).
[doc("Side-by-side Db benchmark: ours vs the official wheel and four embedded peers; --scale: the 100k/1M/10M scale curve (see docs/benchmarks.md).")]
bench *args:
    {{python}} -m slatedb.bench.db {{args}}

# Durable puts against a real S3 server (SeaweedFS started on 127.0.0.1 unless --endpoint-url):
# durable put p50 against one conditional PUT's, and 16 concurrent durable writers.
[doc("Durable puts on S3 (SeaweedFS started here unless --endpoint-url): p50 against one PUT, 16 writers.")]
bench-s3 *args:
    {{python}} -m slatedb.bench.durable_s3 {{args}}

# Spark data source benchmark: bulk load and read rows/s with 1 and 2 executor cores against one
# slatedb.Db (puts in batches, scan) in the same run, with ratios (see docs/spark.md).
[doc("Spark data source benchmark: bulk load and read rows/s against slatedb.Db (see docs/spark.md).")]
bench-spark *args:
    {{python}} -m slatedb.bench.spark {{args}}
