-- A warehouse of benchmarks schema 9, older than the oldest this platform migrates: its version table
-- and two of its tables (as version 9 declared them), a row each.
CREATE TABLE schema_versions(store VARCHAR PRIMARY KEY, "version" INTEGER NOT NULL, migrated_at TIMESTAMP NOT NULL);
INSERT INTO schema_versions VALUES ('benchmarks', 9, '2026-11-26 12:26:43');
CREATE TABLE raw_rows(benchmark VARCHAR, source_row_id VARCHAR, row_number INTEGER NOT NULL, line INTEGER, row_json JSON NOT NULL, "source" VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL, PRIMARY KEY(benchmark, source_row_id));
INSERT INTO raw_rows VALUES ('arc_easy', 'row-0', 0, 1, '{"question": "Which is a liquid?"}', 'data/arc_easy.jsonl', '2026-11-26 12:20:00');
CREATE TABLE prompts(prompt_id VARCHAR PRIMARY KEY, benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_number INTEGER, system_prompt VARCHAR NOT NULL, user_prompt VARCHAR NOT NULL, labels VARCHAR[] NOT NULL, choices VARCHAR[] NOT NULL, real_answer VARCHAR NOT NULL);
INSERT INTO prompts VALUES ('p1', 'arc_easy', 'row-0', 0, 'Answer with a letter.', 'Which is a liquid?', ['A', 'B'], ['water', 'stone'], 'A');
