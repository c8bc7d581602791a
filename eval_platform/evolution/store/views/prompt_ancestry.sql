-- every prompt's ancestors (depth 0 is the prompt itself), following parents across generations
WITH RECURSIVE created AS (
    SELECT DISTINCT era, prompt_id, operator, parents FROM generations WHERE NOT carried_over
), ancestry(era, prompt_id, ancestor_id, depth, ancestor_operator) AS (
    SELECT era, prompt_id, prompt_id, 0, operator FROM created
    UNION ALL
    SELECT a.era, a.prompt_id, parent.prompt_id, a.depth + 1, parent.operator
    FROM ancestry a
    JOIN created child ON child.era = a.era AND child.prompt_id = a.ancestor_id
    JOIN created parent ON parent.era = a.era AND list_contains(child.parents, parent.prompt_id)
)
SELECT DISTINCT * FROM ancestry
