"""Utilities shared by tools and tests (no mmdet/mmseg imports)."""
