"""The shared store's database layer: its tables (``schema``) and their migrations."""
