"""Matching user messages to workflows: lexical, semantic, explicit initiation."""
