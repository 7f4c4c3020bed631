"""Cursors and dispatch: what a subscription has acknowledged, and which consumer gets which message."""
