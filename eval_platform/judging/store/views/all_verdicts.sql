-- every verdict, whoever wrote it: recorded elsewhere, a panel on the stored sets, a panel on MT-Bench
SELECT * FROM recorded_verdicts
UNION ALL
SELECT * FROM judge_verdicts
UNION ALL
SELECT * FROM mt_bench_verdicts
