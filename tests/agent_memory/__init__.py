"""Agent-editable working memory (spec 003)."""
