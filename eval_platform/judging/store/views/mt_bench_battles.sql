-- MT-Bench's battles: the model pairs judged on MT-Bench's questions (item_id: question:model_a:model_b)
SELECT judge, CAST(split_part(item_id, ':', 1) AS INTEGER) AS question_id, turn, model_a, model_b, winner, item_id
FROM judge_battles
WHERE set_name = 'mt_bench'
