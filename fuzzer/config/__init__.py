"""A campaign: its file, its settings resolved once, its plan and its pools."""
