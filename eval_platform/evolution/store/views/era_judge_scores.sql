-- era -> generation -> prompt -> every judge's verdict
SELECT g.era, g.generation, g.prompt_id, g.operator, g.carried_over, g.fitness, g.quality_score_avg,
       j.judge_name, j.judge_model, j.faithfulness, j.clarity, j.readability, j.score, j.error,
       j.judge_duration_ms, g.compressed_text
FROM generations g JOIN judge_scores j ON j.era = g.era AND j.prompt_id = g.prompt_id
