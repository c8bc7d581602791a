-- each judge's MT-Bench leaderboard (mt_bench: a judge of the model pairs; mt_bench_human: the human
-- experts' majority labels), ranked by Bradley-Terry rating
SELECT judge, set_name, rank() OVER (PARTITION BY judge, set_name ORDER BY rating DESC) AS rank, model, battles,
       wins, losses, ties, win_rate, win_rate_low, win_rate_high, rating, rating_low, rating_high, lc_baseline,
       lc_win_rate, lc_low, lc_high
FROM judging_leaderboard
WHERE set_name IN ('mt_bench', 'mt_bench_human')
ORDER BY set_name, judge, rank, model
