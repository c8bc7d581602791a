-- a score (a task's result, under its settings key and solver) -> each document's value of that metric ->
-- the exact prompt -> the answer and what the filter took out of it -> the reference -> the document
-- and, for a dataset, its source row, file and line
SELECT r.benchmark, r.model, r.model_fingerprint, r.settings_key, r.solver, r.task, r.metric, r.filter,
       r.num_fewshot, r.value AS score, s.doc_id, s.document_id,
       s.metrics -> ('$."' || r.metric || '"') AS item_value, s.prompt, s.arguments,
       s.responses AS answer, s.filtered_responses AS extracted, s.target AS reference, s.fewshot_ids,
       s.doc, d.source_row_id, raw.row_number, raw.line, raw.source, raw.row_json AS source_row,
       r.settings -> '$.data_files' AS data_files, r.run_id
FROM results r
JOIN samples s ON s.benchmark = r.benchmark AND s.model = r.model AND s.settings_key = r.settings_key
              AND s.solver = r.solver AND s.task = r.task AND s.filter = r.filter
LEFT JOIN documents d ON d.benchmark = s.benchmark AND d.document_id = s.document_id
LEFT JOIN raw_rows raw ON raw.benchmark = d.benchmark AND raw.source_row_id = d.source_row_id
WHERE NOT r.is_group
