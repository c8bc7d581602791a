-- each document's numeric value of each per-document metric (IFEval's per-instruction lists are left
-- out), with its answer and the run that computed its answers (its latest answer's, where runs shared them);
-- a document answered k times (sample_scores) also by the mean of its answers' values, named
-- `<metric> pass@1` for 0/1 values (results' name) and `<metric> mean@<k>` for others
WITH answered AS (
    SELECT s.benchmark, s.model, s.settings_key, s.solver, s.task, s.doc_id, s.filter,
           arg_max(a.run_id, a.answered_at) AS prediction_run_id
    FROM samples s, unnest(s.request_keys) AS k(request_key)
    JOIN answers a ON a.model_fingerprint = s.model_fingerprint AND a.request_key = k.request_key
    GROUP BY ALL)
SELECT * FROM (
    SELECT s.benchmark, s.model, s.model_fingerprint, s.settings_key, s.solver, s.task, s.filter, s.doc_id,
           s.document_id, m.key AS metric, s.run_id,
           CASE json_type(m.value) WHEN 'BOOLEAN' THEN (m.value::VARCHAR = 'true')::DOUBLE
                ELSE TRY_CAST(m.value::VARCHAR AS DOUBLE) END AS value,
           s.filtered_responses, s.target, s.prompt, d.prediction_run_id
    FROM samples s CROSS JOIN json_each(s.metrics) m
    LEFT JOIN answered d USING (benchmark, model, settings_key, solver, task, doc_id, filter)
    UNION ALL BY NAME
    SELECT c.benchmark, c.model, c.model_fingerprint, c.settings_key, c.solver, c.task, c.filter, c.doc_id,
           any_value(s.document_id) AS document_id,
           c.metric || CASE WHEN bool_and(c.value IN (0, 1)) THEN ' pass@1' ELSE ' mean@' || count(*) END AS metric,
           any_value(c.run_id) AS run_id, avg(c.value) AS value, any_value(s.filtered_responses) AS filtered_responses,
           any_value(s.target) AS target, any_value(s.prompt) AS prompt, any_value(d.prediction_run_id) AS prediction_run_id
    FROM sample_scores c
    JOIN samples s USING (benchmark, model, settings_key, solver, task, doc_id, filter)
    LEFT JOIN answered d USING (benchmark, model, settings_key, solver, task, doc_id, filter)
    GROUP BY c.benchmark, c.model, c.model_fingerprint, c.settings_key, c.solver, c.task, c.filter, c.doc_id, c.metric)
WHERE value IS NOT NULL
