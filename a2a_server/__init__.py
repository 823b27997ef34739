"""Every agent an A2A v1.0 server (issue 38 §1): cards, and messages that become tasks."""
