-- each judge on each set: how often its verdict survives swapping the answers (pairs judged in both
-- orders with the same verdict, none unparsed), and how often the answer shown first wins its
-- decisive verdicts (0.5 is unbiased when both orders are judged)
WITH pairs AS (
    SELECT judge, set_name, item_id, turn, count(DISTINCT shown_order) = 2 AS both_orders,
           count(DISTINCT verdict) = 1 AND NOT bool_or(verdict = 'unparsed') AS consistent
    FROM all_verdicts
    GROUP BY judge, set_name, item_id, turn
), consistency AS (
    SELECT judge, set_name, count(*) AS pairs, count(*) FILTER (WHERE both_orders) AS pairs_in_both_orders,
           count(*) FILTER (WHERE both_orders AND consistent) AS consistent_pairs
    FROM pairs
    GROUP BY judge, set_name
), first_shown AS (
    SELECT judge, set_name, count(*) FILTER (WHERE verdict IN ('a', 'b')) AS decisive_verdicts,
           count(*) FILTER (WHERE (verdict = 'a' AND shown_order = 'as_is') OR (verdict = 'b' AND shown_order = 'swapped'))
               AS first_shown_wins
    FROM all_verdicts
    GROUP BY judge, set_name
)
SELECT judge, set_name, pairs, pairs_in_both_orders, consistent_pairs,
       consistent_pairs / nullif(pairs_in_both_orders, 0) AS consistency,
       decisive_verdicts, first_shown_wins, first_shown_wins / nullif(decisive_verdicts, 0) AS first_shown_win_rate
FROM consistency JOIN first_shown USING (judge, set_name)
ORDER BY set_name, judge
