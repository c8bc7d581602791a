"""What the three domains share: the model protocol and its backends, the gateway for API calls,
file ingestion, the warehouse and its stores' base, reproducibility records, the resources."""
