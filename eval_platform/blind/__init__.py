"""Blind human evaluation: scoring sheets and answer keys, read-back, raters and tallies; their
store, assets, jobs and filled-sheet sensor."""
