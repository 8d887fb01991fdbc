"""The "sag2" profile: its analyzer and its diversity step."""
