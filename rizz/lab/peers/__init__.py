"""The real peers (ACE, mem0) run beside rizz's policies in ``rizz bench`` (docs/peers.md)."""
