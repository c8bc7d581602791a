-- every rejected row, at any stage, with its file, line and reason
SELECT benchmark, 'ingest' AS stage, source, line, source_row_id, row_json, reason, rejected_at
FROM ingest_rejections
UNION ALL
SELECT benchmark, 'fewshot', source, line, source_row_id, row_json, reason, rejected_at
FROM fewshot_rejections
UNION ALL
SELECT p.benchmark, 'preprocess', r.source, r.line, p.source_row_id, p.row_json, p.reason, p.rejected_at
FROM document_rejections p LEFT JOIN raw_rows r USING (benchmark, source_row_id)
UNION ALL
SELECT benchmark, 'import', source, line, task || '/' || source_doc_id, sample_excerpt, reason, rejected_at
FROM import_rejections
