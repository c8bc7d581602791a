"""The blind-evaluation domain's tables (schema version 2): questions, answers, issued sheets and
keys, ratings read back from filled sheets (and their problems), tallies and results."""

from __future__ import annotations

from eval_platform.common.warehouse import Store

TABLES = {
    "blind_questions": "Question_ID VARCHAR PRIMARY KEY, Question VARCHAR, Ground_Truth VARCHAR",
    "blind_answers": "system VARCHAR, Question_ID VARCHAR, answer VARCHAR, source VARCHAR, "
    "PRIMARY KEY (system, Question_ID)",
    "blind_issues": "sheet_id VARCHAR PRIMARY KEY, seed INTEGER, systems VARCHAR[], sheet_path VARCHAR, "
    "key_path VARCHAR, issued_at TIMESTAMP",
    "blind_key": "sheet_id VARCHAR, Question_ID VARCHAR, system_a VARCHAR, system_b VARCHAR, "
    "PRIMARY KEY (sheet_id, Question_ID)",
    "blind_scores": "sheet_id VARCHAR, rater VARCHAR, file VARCHAR, Question_ID VARCHAR, system VARCHAR, "
    "side VARCHAR, score INTEGER, opponent_score INTEGER, outcome VARCHAR, notes VARCHAR, "
    "PRIMARY KEY (sheet_id, rater, Question_ID, system)",
    "blind_sheet_problems": "file VARCHAR, cell VARCHAR, problem VARCHAR, checked_at TIMESTAMP",
    "blind_tallies": "sheet_id VARCHAR, scope VARCHAR, system VARCHAR, wins INTEGER, losses INTEGER, "
    "ties INTEGER, ratings INTEGER, average_score DOUBLE, PRIMARY KEY (sheet_id, scope, system)",
    "blind_results": "sheet_id VARCHAR, scope VARCHAR, sentence VARCHAR, mean_difference DOUBLE, "
    "sign_test_p DOUBLE, wilcoxon_p DOUBLE, ci_low DOUBLE, ci_high DOUBLE, rater_kappa DOUBLE, "
    "PRIMARY KEY (sheet_id, scope)",
}


class BlindSchema(Store):
    """The blind-evaluation tables (BlindStore reads and writes them)."""

    name = "blind_evaluation"
    version = 2
    tables = TABLES
