-- each pair whose two models are named, judged in both orders, as one battle (FastChat's
-- show_result.py): the winner where both orders agree, a tie where the first says tie or the two
-- disagree; a pair with an unparsed verdict is no battle. A pair judged in one order: its verdict.
WITH pairs AS (
    SELECT judge, set_name, item_id, turn, any_value(model_a) AS model_a, any_value(model_b) AS model_b,
           any_value(verdict) FILTER (WHERE shown_order = 'as_is') AS as_is,
           any_value(verdict) FILTER (WHERE shown_order = 'swapped') AS swapped,
           bool_or(verdict = 'unparsed') AS unparsed
    FROM all_verdicts
    WHERE model_a IS NOT NULL AND model_b IS NOT NULL
    GROUP BY judge, set_name, item_id, turn
), orders AS (
    SELECT *, coalesce(as_is, swapped) AS first_order, coalesce(swapped, as_is) AS second_order FROM pairs
)
SELECT judge, set_name, item_id, turn, model_a, model_b,
       CASE WHEN first_order = 'tie' OR first_order <> second_order THEN 'tie'
            WHEN first_order = 'a' THEN 'model_a' ELSE 'model_b' END AS winner
FROM orders
WHERE NOT unparsed
