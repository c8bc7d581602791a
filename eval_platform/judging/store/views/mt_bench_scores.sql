-- MT-Bench's single-answer grading as FastChat's show_result.py reports it: each judge's mean score
-- (1-10) of each model, per turn and over both, judgments without a rating left out (and counted)
SELECT judge, model, avg(score) AS score, avg(score) FILTER (WHERE turn = 1) AS turn_1,
       avg(score) FILTER (WHERE turn = 2) AS turn_2, count(score) AS graded,
       count(*) FILTER (WHERE score IS NULL) AS unrated
FROM judge_grades
WHERE set_name = 'mt_bench'
GROUP BY judge, model
ORDER BY judge, score DESC NULLS LAST, model
