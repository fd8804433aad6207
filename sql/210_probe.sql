-- Recall over time (`pgeval watch`, table pgeval.probe, migration 0009_probe; docs/watch.md).
--
-- A probe is one measurement of a target's ANN stage at its production setting on a small,
-- stable set of queries against exact search. pgeval.probe_history is what Grafana or any SQL
-- client charts: one row per probe with what explains a change beside it.
--
-- A *series* is the probes of one target (one group of it with --group-by), stage, k, settings,
-- query source and path (via: 'cli', `pgeval watch`; 'sql', pgeval.run_probe, sql/220_run_probe.sql,
-- migration 0010_probe_via); within it, the probes of one *index build* (the index's name, oid,
-- relfilenode, method and options: a REINDEX or a new CREATE INDEX starts a new build) are
-- compared with the build's first probe, its *baseline*. Bounds (each probe keeps those it was given):
--   min_recall  recall does not reach min_recall (pgeval.reaches: a mean of per-query ratios is
--               a float sum, judged as sweeps judge a target)
--   max_drop    baseline_recall - recall > max_drop (the drop since the build's first probe,
--               beyond pgeval.reach_tolerance())
--   max_p95_ms  p95_ms > max_p95_ms
-- Row changes since the baseline come from the rows counted by the probes (table_rows) and from
-- the server's counters (pg_stat_all_tables n_tup_ins / n_tup_upd / n_tup_del; NULL when the
-- counters were reset in between).
-- (Plain SQL over pgeval.probe and the reach rule: `pgeval init` drops the view before the API.)
CREATE OR REPLACE VIEW pgeval.probe_history AS
WITH w AS (
    SELECT p.*,
           lag(p.recall) OVER b AS previous_recall,
           first_value(p.probed_at) OVER b AS baseline_at,
           first_value(p.recall) OVER b AS baseline_recall,
           first_value(p.table_rows) OVER b AS baseline_rows,
           first_value(p.table_stats) OVER b AS baseline_stats
      FROM pgeval.probe p
    WINDOW b AS (PARTITION BY p.target, p.group_key, p.stage, p.k, p.settings, p.query_source,
                              p.via, p.index_name, p.index_build
                 ORDER BY p.probe_id)
)
SELECT w.probe_id, w.probed_at, w.target, w.group_key, w.stage, w.k, w.settings, w.query_source, w.queries,
       w.recall, w.p50_ms, w.p95_ms, w.p99_ms, w.rows_mean, w.table_rows,
       w.data_checksum AS data_version,
       w.index_name,
       w.index_name || ' (oid ' || (w.index_build ->> 'oid') || ', filenode '
           || (w.index_build ->> 'filenode') || ')' AS index_build_label,
       w.index_build, w.index_state,
       w.ground_truth ->> 'status' AS ground_truth,
       w.bounds,
       ARRAY(SELECT c.bound
               FROM (VALUES
                   (1, 'min_recall',
                    NOT pgeval.reaches(w.recall, (w.bounds ->> 'min_recall')::float8)),
                   (2, 'max_drop',
                    w.baseline_recall - w.recall
                        > (w.bounds ->> 'max_drop')::float8 + pgeval.reach_tolerance()),
                   (3, 'max_p95_ms', w.p95_ms > (w.bounds ->> 'max_p95_ms')::float8)
               ) AS c (n, bound, crossed)
              WHERE c.crossed ORDER BY c.n) AS crossed,
       w.previous_recall,
       w.baseline_at, w.baseline_recall, w.baseline_rows,
       w.baseline_recall - w.recall AS recall_drop,
       w.table_rows - w.baseline_rows AS rows_since_baseline,
       nullif(greatest((w.table_stats ->> 'n_tup_ins')::bigint
                       - (w.baseline_stats ->> 'n_tup_ins')::bigint, -1), -1)
           AS inserted_since_baseline,
       nullif(greatest((w.table_stats ->> 'n_tup_upd')::bigint
                       - (w.baseline_stats ->> 'n_tup_upd')::bigint, -1), -1)
           AS updated_since_baseline,
       nullif(greatest((w.table_stats ->> 'n_tup_del')::bigint
                       - (w.baseline_stats ->> 'n_tup_del')::bigint, -1), -1)
           AS deleted_since_baseline,
       w.timed_ms, w.wall_ms, w.advice, w.sweep, w.testset, w.config_hash,
       w.via
  FROM w;

COMMENT ON VIEW pgeval.probe_history IS
    'One row per `pgeval watch` probe: recall, latency, rows, index build, data version, the '
    'bounds crossed, and the changes since the first probe of the same index build (docs/watch.md)';

-- Since when bound p_bound has been crossed without a break in the probe's series: the time of
-- the first probe of the run of consecutive probes, ending at p_probe, that crossed it (NULL
-- when p_probe did not cross it).
CREATE OR REPLACE FUNCTION pgeval.probe_crossed_since(p_probe bigint, p_bound text)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    WITH me AS (SELECT * FROM pgeval.probe_history WHERE probe_id = p_probe),
    s AS (
        SELECT h.probe_id, h.probed_at, p_bound = ANY (h.crossed) AS crossed
          FROM pgeval.probe_history h JOIN me
            ON h.target = me.target AND h.group_key IS NOT DISTINCT FROM me.group_key
           AND h.stage = me.stage AND h.k = me.k
           AND h.settings = me.settings AND h.query_source = me.query_source AND h.via = me.via
         WHERE h.probe_id <= me.probe_id)
    SELECT min(s.probed_at)
      FROM s
     WHERE (SELECT crossed FROM s WHERE probe_id = p_probe)
       AND s.probe_id > coalesce((SELECT max(probe_id) FROM s WHERE NOT s.crossed), 0)
$$;
