-- each judge against the humans of each labelled set, one row: its verdicts, and every agreement
-- metric with its 95% interval (see eval_platform/judging/agreement.py for their definitions)
WITH counts AS (
    SELECT judge, set_name, count(DISTINCT item_id) AS items, count(*) AS verdicts,
           count(DISTINCT shown_order) AS orders, count(*) FILTER (WHERE verdict = 'unparsed') AS unparsed,
           count(*) FILTER (WHERE verdict = 'tie') AS ties, sum(cost_usd) AS cost_usd
    FROM all_verdicts
    GROUP BY judge, set_name
)
SELECT a.judge, a.set_name, c.items, c.verdicts, c.orders, c.unparsed, c.ties, c.cost_usd,
       max(a.value) FILTER (WHERE a.metric = 'accuracy') AS accuracy,
       max(a.low) FILTER (WHERE a.metric = 'accuracy') AS accuracy_low,
       max(a.high) FILTER (WHERE a.metric = 'accuracy') AS accuracy_high,
       max(a.value) FILTER (WHERE a.metric = 'kappa') AS kappa,
       max(a.low) FILTER (WHERE a.metric = 'kappa') AS kappa_low,
       max(a.high) FILTER (WHERE a.metric = 'kappa') AS kappa_high,
       max(a.value) FILTER (WHERE a.metric = 'human_kappa') AS human_kappa,
       max(a.value) FILTER (WHERE a.metric = 'position_consistency') AS position_consistency,
       max(a.low) FILTER (WHERE a.metric = 'position_consistency') AS position_consistency_low,
       max(a.high) FILTER (WHERE a.metric = 'position_consistency') AS position_consistency_high,
       max(a.value) FILTER (WHERE a.metric = 'first_wins') AS first_wins,
       max(a.value) FILTER (WHERE a.metric = 'human_first_wins') AS human_first_wins,
       max(a.value) FILTER (WHERE a.metric = 'longer_wins') AS longer_wins,
       max(a.value) FILTER (WHERE a.metric = 'human_longer_wins') AS human_longer_wins
FROM judge_human_agreement a JOIN counts c USING (judge, set_name)
GROUP BY a.judge, a.set_name, c.items, c.verdicts, c.orders, c.unparsed, c.ties, c.cost_usd
ORDER BY a.set_name, a.judge
