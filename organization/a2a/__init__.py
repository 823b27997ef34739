"""The A2A protocol adapter: agent cards served from the organization (no app above it)."""
