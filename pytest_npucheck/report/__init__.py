"""Renderers: structured results -> text lines, JSON documents."""
