-- each document's numeric value of each per-document metric (IFEval's per-instruction lists are left
-- out), with its answer and the run that computed its answers (its latest answer's, where runs shared them)
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
    LEFT JOIN answered d USING (benchmark, model, settings_key, solver, task, doc_id, filter))
WHERE value IS NOT NULL
