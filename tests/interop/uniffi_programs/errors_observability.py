"""Error variants for bad input and misuse; settings; logging through init_logging; metrics
through DefaultMetricsRecorder."""
import asyncio, json, sys

import slatedb.uniffi as u


class Records(u.LogCallback):
    def __init__(self):
        self.records = []

    def log(self, record):
        self.records.append(record)


def kind(e):
    return type(e).__qualname__ if isinstance(e, u.Error) else type(e).__name__


async def attempt(out, name, coro_or_fn):
    try:
        got = coro_or_fn()
        if asyncio.iscoroutine(got):
            await got
        out[name] = "ok"
    except Exception as e:  # noqa: BLE001
        out[name] = kind(e)


async def main(root):
    out = {}
    records = Records()
    u.init_logging(u.LogLevel.INFO, records)
    await attempt(out, "init_logging_twice", lambda: u.init_logging(u.LogLevel.INFO, None))

    s = u.Settings.default()
    await attempt(out, "settings_bad_type", lambda: s.set("flush_interval", "1"))
    await attempt(out, "settings_bad_json", lambda: s.set("flush_interval", "not json"))
    await attempt(out, "settings_from_bad_json", lambda: u.Settings.from_json_string("{"))
    s.set("l0_sst_size_bytes", "4096")
    out["settings_roundtrip"] = json.loads(u.Settings.from_json_string(s.to_json_string()).to_json_string())["l0_sst_size_bytes"]
    await attempt(out, "resolve_file_with_path", lambda: u.ObjectStore.resolve("file://" + root))

    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    recorder = u.DefaultMetricsRecorder()
    app = recorder.register_counter("app.requests", "requests seen", [u.MetricLabel(key="route", value="/")])
    app.increment(3)
    b = u.DbBuilder("db", store)
    b.with_settings(s)
    b.with_metrics_recorder(recorder)
    db = await b.build()
    await attempt(out, "builder_reused", lambda: b.build())
    for i in range(50):
        await db.put(b"key%03d" % i, b"x" * 100)
    await db.get(b"key001")
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))

    await attempt(out, "empty_key", lambda: db.put(b"", b"v"))
    await attempt(out, "huge_key", lambda: db.put(b"k" * 70000, b"v"))
    await attempt(out, "str_key", lambda: db.put("text", b"v"))
    await attempt(out, "scan_bad_range", lambda: db.scan(u.KeyRange(start=b"b", start_inclusive=True, end=b"a", end_inclusive=True)))
    await attempt(out, "empty_batch", lambda: db.write(u.WriteBatch()))
    it = await db.scan(u.KeyRange(start=b"key010", start_inclusive=True, end=b"key020", end_inclusive=False))
    await attempt(out, "seek_before_range", lambda: it.seek(b"key000"))
    await attempt(out, "seek_after_range", lambda: it.seek(b"key030"))
    t = await db.begin(u.IsolationLevel.SNAPSHOT)
    await t.rollback()
    await attempt(out, "txn_after_rollback", lambda: t.get(b"key001"))

    metric = recorder.metric_by_name_and_labels("app.requests", [u.MetricLabel(key="route", value="/")])
    out["app_metric"] = [metric.value.is_counter(), metric.value[0], metric.description]
    snap = recorder.snapshot()
    out["engine_metrics"] = [len(snap) > 1, all(m.name.startswith(("slatedb.", "app.")) for m in snap),
                             any(m.value.is_counter() and m.value[0] > 0 and m.name.startswith("slatedb.") for m in snap)]
    await db.shutdown()
    await attempt(out, "put_after_shutdown", lambda: db.put(b"k", b"v"))
    out["logged"] = [len(records.records) > 0,
                     all(isinstance(r.level, u.LogLevel) and r.target.startswith("slatedb") for r in records.records)]
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
