"""Plumbing every app shares and no domain owns: errors, inputs, rendering, throttling,
transactions, prepared statements and the transactional outbox. It imports no domain app."""
