"""Every agent an A2A v1.0 server: cards, and messages that become tasks."""
