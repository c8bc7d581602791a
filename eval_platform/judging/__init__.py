"""Pairwise judging: two answers to one instruction judged by a panel (MT-Bench's prompts, both
orders), the judges measured against human labels, win rates, length-controlled win rates and
Bradley-Terry ratings. Logic only: the assets and the store wrap it."""
