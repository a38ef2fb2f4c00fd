"""``tatara-export-worker``: ships one export of an ephemeral Process and writes its receipt
(docs/behaviour.md#the-export-worker)."""
